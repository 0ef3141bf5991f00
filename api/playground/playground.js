// Kiln playground: plain browser JavaScript over the public HTTP API (no build step, no framework),
// so that everything it does is something a user's own code can do with a token.
'use strict';

// The token lives in this tab's session storage (gone when the tab closes), never in local storage
// (which every tab and every later visit could read) nor in the address bar.
const TOKEN_KEY = 'kiln.token';
const TERMINAL = new Set(['succeeded', 'failed', 'canceled', 'aborted']);
/** What POST /v1/predictions/{id}/retry takes: the prediction runs again, same id, as a new run. */
const RETRYABLE = new Set(['failed', 'canceled', 'aborted']);
const $ = (id) => document.getElementById(id);

const state = { token: null, config: null, model: null, version: null, prediction: null, stream: null, pollTimer: null, streamedText: '' };

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') node.className = v;
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== undefined && c !== null) node.append(c);
  return node;
}

class ApiError extends Error {
  constructor(status, body) {
    super(body && body.detail ? body.detail : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/**
 * An API URL as a path on this page's origin: the page talks to the API that served it, whatever
 * base KILN_PUBLIC_URL gives absolute URLs, and its policy allows nothing else.
 */
function onThisOrigin(url) {
  const u = new URL(url, location.href);
  return /^\/(v1|openai)\//.test(u.pathname) ? u.pathname + u.search : url;
}

/** The model the playground opens with unless the address names one (`?model=owner/name`). */
const DEFAULT_MODEL = 'kiln/smollm2-135m-instruct';

async function api(path, options = {}) {
  const headers = { Authorization: `Bearer ${state.token}`, ...(options.headers || {}) };
  if (options.json !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { ...options, headers, body: options.json !== undefined ? JSON.stringify(options.json) : options.body });
  const body = res.headers.get('content-type')?.includes('json') ? await res.json() : null;
  if (!res.ok) throw new ApiError(res.status, body);
  return body;
}

// ---- sign-in -------------------------------------------------------------------------------

/** `#token=...` (what `npm start` prints) is taken once and removed from the address bar. */
function tokenFromFragment() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (!m) return null;
  history.replaceState(null, '', location.pathname + location.search);
  return decodeURIComponent(m[1]);
}

async function signIn(token) {
  state.token = token;
  try {
    const account = await api('/v1/account');
    sessionStorage.setItem(TOKEN_KEY, token);
    $('whoami').textContent = `Signed in as ${account.username}`;
    $('logout').hidden = false;
    $('login').hidden = true;
    $('app').hidden = false;
    await Promise.all([loadModels(), loadHistory()]);
    return true;
  } catch (err) {
    state.token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    $('login').hidden = false;
    $('app').hidden = true;
    $('login-error').textContent =
      err.status === 401 ? 'That token is not valid (revoked, or from another Kiln).' : `Could not reach the API: ${err.message}`;
    return false;
  }
}

// ---- models and the input form ---------------------------------------------------------------

async function loadModels() {
  const list = $('models');
  list.textContent = '';
  let page = await api('/v1/models');
  const models = [...page.results];
  while (page.next) {
    page = await api(onThisOrigin(page.next));
    models.push(...page.results);
  }
  for (const m of models) {
    const id = `${m.owner}/${m.name}`;
    list.append(
      el(
        'li',
        {},
        el(
          'button',
          { type: 'button', dataset: { model: id }, onclick: () => selectModel(id) },
          id,
          el('small', {}, `${m.task} · ${m.visibility}`),
        ),
      ),
    );
  }
  const wanted = new URLSearchParams(location.search).get('model');
  // The trained chat model is what a first look should show, where it was seeded.
  const first = models.find((m) => `${m.owner}/${m.name}` === (wanted || DEFAULT_MODEL)) || models[0];
  if (first) await selectModel(`${first.owner}/${first.name}`);
}

async function selectModel(id) {
  const model = await api(`/v1/models/${id}`);
  state.model = model;
  state.version = model.latest_version;
  for (const b of document.querySelectorAll('#models button')) b.classList.toggle('selected', b.dataset.model === id);
  $('model-name').textContent = id;
  $('model-desc').textContent = model.description || `${model.task} model`;
  const url = new URL(location.href);
  url.searchParams.set('model', id);
  history.replaceState(null, '', url);
  const schema = state.version?.openapi_schema?.components?.schemas?.Input;
  if (!schema) {
    $('input-form').hidden = true;
    $('model-desc').textContent += ' — no version pushed yet.';
    return;
  }
  renderForm(schema);
  $('input-form').hidden = false;
  $('form-error').textContent = '';
}

/** A field's widget from its JSON Schema: the same schema the API validates with. */
function fieldKind(name, prop) {
  if (Array.isArray(prop.enum)) return 'enum';
  if (prop.type === 'boolean') return 'boolean';
  if (prop.type === 'integer' || prop.type === 'number') return 'number';
  if (prop.type === 'string') return /image|file|audio|url/i.test(`${name} ${prop.description || ''}`) ? 'file' : 'text';
  return 'json';
}

function renderForm(schema) {
  const fields = $('fields');
  fields.textContent = '';
  const required = new Set(schema.required || []);
  for (const [name, prop] of Object.entries(schema.properties || {})) {
    const kind = fieldKind(name, prop);
    const id = `field-${name}`;
    let control;
    const def = prop.default;
    if (kind === 'enum') {
      control = el('select', { id, name }, ...prop.enum.map((v) => el('option', { value: v, selected: v === def }, String(v))));
    } else if (kind === 'boolean') {
      control = el('input', { id, name, type: 'checkbox', checked: def === true });
    } else if (kind === 'number') {
      control = el('input', {
        id,
        name,
        type: 'number',
        value: def,
        min: prop.minimum ?? prop.exclusiveMinimum,
        max: prop.maximum ?? prop.exclusiveMaximum,
        step: prop.type === 'integer' ? 1 : 'any',
        placeholder: def === undefined ? 'optional' : undefined,
      });
    } else if (kind === 'json') {
      control = el('textarea', { id, name, rows: 3, placeholder: `JSON, e.g. ${exampleJson(prop)}` });
      if (def !== undefined) control.value = JSON.stringify(def);
    } else {
      control = el('textarea', { id, name, rows: kind === 'file' ? 1 : 3 });
      if (def !== undefined) control.value = def;
    }
    control.dataset.kind = kind;
    const hint = [prop.description, required.has(name) ? 'required' : null].filter(Boolean).join(' · ');
    const field = el(
      'div',
      { class: 'field', dataset: { field: name } },
      el('label', { for: id }, name, el('code', {}, typeLabel(prop))),
      el('p', { class: 'hint' }, hint),
      control,
    );
    if (kind === 'file') {
      const picker = el('input', {
        type: 'file',
        'aria-label': `Upload a file for ${name}`,
        onchange: (e) => uploadInto(e.target, control),
      });
      field.append(el('div', { class: 'file-row' }, picker, el('span', { class: 'hint' }, 'or paste a URL above')));
    }
    fields.append(field);
  }
}

function typeLabel(prop) {
  if (prop.type) return prop.type;
  if (prop.anyOf) return prop.anyOf.map(typeLabel).join(' | ');
  return 'any';
}

function exampleJson(prop) {
  if (prop.type === 'array' && prop.items?.properties?.role) return '[{"role":"user","content":"Hello"}]';
  if (prop.type === 'array' || prop.anyOf?.some((p) => p.type === 'array')) return '["a","b"]';
  return '{}';
}

/** Files go up through POST /v1/files; the input holds the file's signed URL, as in Replicate. */
async function uploadInto(picker, target) {
  const file = picker.files[0];
  if (!file) return;
  const form = new FormData();
  form.append('content', file, file.name);
  target.value = 'uploading…';
  try {
    const uploaded = await api('/v1/files', { method: 'POST', body: form });
    target.value = uploaded.urls.get;
  } catch (err) {
    target.value = '';
    $('form-error').textContent = `Upload failed: ${err.message}`;
  }
}

function collectInput() {
  const input = {};
  for (const control of $('fields').querySelectorAll('[data-kind]')) {
    const { name } = control;
    const kind = control.dataset.kind;
    if (kind === 'boolean') input[name] = control.checked;
    else if (control.value === '') continue;
    else if (kind === 'number') input[name] = Number(control.value);
    else if (kind === 'json') {
      try {
        input[name] = JSON.parse(control.value);
      } catch {
        throw Object.assign(new Error(`${name}: not valid JSON`), { field: `input.${name}` });
      }
    } else input[name] = control.value;
  }
  return input;
}

function markInvalid(fields) {
  for (const f of document.querySelectorAll('.field')) f.classList.remove('invalid');
  for (const path of fields) {
    const name = path.replace(/^input\./, '').split('.')[0];
    document.querySelector(`.field[data-field="${CSS.escape(name)}"]`)?.classList.add('invalid');
  }
}

// ---- running a prediction ----------------------------------------------------------------------

async function run(event) {
  event.preventDefault();
  $('form-error').textContent = '';
  markInvalid([]);
  let input;
  try {
    input = collectInput();
  } catch (err) {
    $('form-error').textContent = err.message;
    markInvalid([err.field]);
    return;
  }
  $('run').disabled = true;
  try {
    const prediction = await api(`/v1/models/${state.model.owner}/${state.model.name}/predictions`, {
      method: 'POST',
      json: { input, stream: true },
    });
    showPrediction(prediction);
    loadHistory();
  } catch (err) {
    const invalid = err.body?.invalid_fields || [];
    $('form-error').textContent = err.message;
    markInvalid(invalid.map((f) => f.field));
    $('run').disabled = false;
  }
}

function stopWatching() {
  state.stream?.close();
  state.stream = null;
  clearTimeout(state.pollTimer);
}

function showPrediction(p) {
  stopWatching();
  state.prediction = p;
  state.streamedText = '';
  $('result').hidden = false;
  $('output').textContent = '';
  $('prediction-id').textContent = p.id;
  $('run-link').href = runUrl(p.id);
  render(p);
  if (!TERMINAL.has(p.status)) watch(p);
}

function watch(p) {
  $('cancel').hidden = false;
  // Streamed tokens appear as they come; the polled JSON carries status, logs and metrics.
  if (p.urls.stream && isText()) {
    const stream = new EventSource(onThisOrigin(p.urls.stream));
    state.stream = stream;
    stream.addEventListener('output', (e) => {
      state.streamedText += e.data;
      textBox().textContent = state.streamedText;
    });
    // The engine attempt that wrote the text so far failed; the next one starts it again.
    stream.addEventListener('reset', () => {
      state.streamedText = '';
      textBox().textContent = '';
    });
    stream.addEventListener('done', () => stream.close());
    stream.addEventListener('error', () => {
      if (stream.readyState === EventSource.CLOSED) state.stream = null;
    });
  }
  const poll = async () => {
    try {
      const fresh = await api(`/v1/predictions/${p.id}`);
      if (state.prediction?.id !== p.id) return;
      state.prediction = fresh;
      render(fresh);
      await showSetup(fresh);
      if (TERMINAL.has(fresh.status)) {
        stopWatching();
        $('run').disabled = false;
        $('cancel').hidden = true;
        loadHistory();
        return;
      }
    } catch (err) {
      $('prediction-error').textContent = `Lost the prediction for a moment: ${err.message}`;
    }
    state.pollTimer = setTimeout(poll, 400);
  };
  state.pollTimer = setTimeout(poll, 200);
}

/** A cold model's warm-up, as the engine's heartbeats report it: download bytes, then load. */
async function showSetup(p) {
  const line = $('setup');
  if (p.status !== 'starting') {
    line.textContent = '';
    return;
  }
  const s = await api(`/v1/predictions/${p.id}/setup`).catch(() => null);
  if (!s || !s.phase) line.textContent = '';
  else if (s.phase === 'download' && s.total)
    line.textContent = `Downloading ${s.file || 'weights'}: ${Math.floor((100 * (s.bytes || 0)) / s.total)}% of ${(s.total / 2 ** 20).toFixed(1)} MiB`;
  else if (s.phase === 'load') line.textContent = 'Loading the model…';
  else if (p.queue && p.queue.position > 1)
    line.textContent = `In the queue: position ${p.queue.position}${p.queue.eta_seconds !== null ? `, about ${Math.ceil(p.queue.eta_seconds)} s` : ''}`;
  else line.textContent = 'Waiting for a node…';
}

function isText() {
  return ['text-generation', 'echo-fixture'].includes(state.model?.task);
}

function textBox() {
  let box = $('output').querySelector('.text');
  if (!box) {
    box = el('div', { class: 'text', 'data-testid': 'output-text' });
    $('output').append(box);
  }
  return box;
}

function render(p) {
  const status = $('status');
  status.textContent = p.status;
  status.className = `status ${p.status}`;
  $('retry').hidden = !RETRYABLE.has(p.status);
  $('logs').textContent = p.logs || '';
  $('prediction-error').textContent = p.error ? `Error: ${p.error}` : '';
  const metrics = $('metrics');
  metrics.textContent = '';
  for (const [k, v] of Object.entries(p.metrics || {}))
    metrics.append(
      el('tr', {}, el('td', {}, k), el('td', {}, typeof v === 'number' ? String(Math.round(v * 1000) / 1000) : JSON.stringify(v))),
    );
  if (p.output !== null && p.output !== undefined) renderOutput(p.output);
}

/** Text as text, a file URL as the image it is (on a checkerboard, so transparency shows), else JSON. */
function renderOutput(output) {
  const box = $('output');
  if (Array.isArray(output) && output.every((s) => typeof s === 'string')) {
    textBox().textContent = output.join('');
    return;
  }
  if (typeof output === 'string' && /^https?:\/\//.test(output)) {
    // Each read signs the file's URL afresh: the same file is the same path.
    const src = onThisOrigin(output);
    const shown = box.querySelector('img')?.getAttribute('src');
    if (shown && shown.split('?')[0] === src.split('?')[0]) return;
    box.textContent = '';
    const img = el('img', { src, alt: 'output image', 'data-testid': 'output-image' });
    img.addEventListener('error', () => box.replaceChildren(el('a', { href: output, target: '_blank' }, output)));
    box.append(
      el('div', { class: 'checkerboard' }, img),
      el('p', {}, el('a', { href: output, target: '_blank', rel: 'noopener' }, 'Open the file')),
    );
    return;
  }
  if (typeof output === 'string') {
    textBox().textContent = output;
    return;
  }
  box.replaceChildren(el('pre', { 'data-testid': 'output-json' }, JSON.stringify(output, null, 2)));
}

async function cancel() {
  if (!state.prediction) return;
  await api(`/v1/predictions/${state.prediction.id}/cancel`, { method: 'POST' }).catch((err) => {
    $('prediction-error').textContent = err.message;
  });
}

/** Runs the shown prediction again and follows the new run, as a new prediction's. */
async function retry() {
  if (!state.prediction) return;
  $('retry').disabled = true;
  try {
    const retried = await api(`/v1/predictions/${state.prediction.id}/retry`, { method: 'POST', json: {} });
    $('run').disabled = true;
    showPrediction(retried);
    loadHistory();
  } catch (err) {
    $('prediction-error').textContent = err.message;
  } finally {
    $('retry').disabled = false;
  }
}

// ---- history -----------------------------------------------------------------------------------

function runUrl(id) {
  const c = state.config;
  return c ? `${c.temporal_ui_url}/namespaces/${encodeURIComponent(c.temporal_namespace)}/workflows/prediction-${id}` : '#';
}

async function loadHistory() {
  const page = await api('/v1/predictions');
  const body = $('history').querySelector('tbody');
  body.textContent = '';
  for (const p of page.results.slice(0, 25)) {
    const row = el(
      'tr',
      {
        dataset: { id: p.id },
        onclick: () =>
          api(`/v1/predictions/${p.id}`).then(async (full) => {
            if (full.model && full.model !== `${state.model?.owner}/${state.model?.name}`)
              await selectModel(full.model).catch(() => undefined);
            showPrediction(full);
          }),
      },
      el('td', {}, el('code', {}, p.id)),
      el('td', {}, p.model || p.version),
      el('td', {}, el('span', { class: `status ${p.status}` }, p.status)),
      el('td', {}, new Date(p.created_at).toLocaleString()),
      el('td', {}, el('a', { href: runUrl(p.id), target: '_blank', rel: 'noopener', onclick: (e) => e.stopPropagation() }, 'Temporal UI')),
    );
    body.append(row);
  }
}

// ---- start -------------------------------------------------------------------------------------

async function main() {
  state.config = await fetch('/playground/config.json').then((r) => r.json());
  $('temporal-link').href = `${state.config.temporal_ui_url}/namespaces/${encodeURIComponent(state.config.temporal_namespace)}/workflows`;
  $('login-form').addEventListener('submit', (e) => {
    e.preventDefault();
    signIn($('token').value.trim());
  });
  $('logout').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    location.reload();
  });
  // Earlier playgrounds kept the token in local storage: take it out.
  localStorage.removeItem(TOKEN_KEY);
  $('input-form').addEventListener('submit', run);
  $('cancel').addEventListener('click', cancel);
  $('retry').addEventListener('click', retry);
  const token = tokenFromFragment() || sessionStorage.getItem(TOKEN_KEY);
  if (token) await signIn(token);
  else $('login').hidden = false;
}

main();

/** A reference page with no external assets (the machine may be offline): it reads /openapi.json. */
export const REFERENCE_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Kiln API reference</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:960px;margin:2rem auto;padding:0 1rem;color:#222}
h1{margin-bottom:.2rem}.op{border:1px solid #ddd;border-radius:6px;margin:.6rem 0;padding:.5rem .8rem}
.m{display:inline-block;min-width:4.5rem;font-weight:700;text-transform:uppercase}
.get{color:#1a7f37}.post{color:#0550ae}.put{color:#8250df}.head{color:#6e7781}.delete{color:#cf222e}
code{background:#f6f8fa;padding:0 .3rem;border-radius:4px}pre{background:#f6f8fa;padding:.6rem;overflow:auto;font-size:13px}
details summary{cursor:pointer;color:#555}
</style></head><body>
<h1>Kiln API reference</h1><p id="desc"></p><div id="ops">Loading /openapi.json…</div>
<script>
fetch('/openapi.json').then(r => r.json()).then(doc => {
  document.getElementById('desc').textContent = doc.info.description;
  const ops = document.getElementById('ops'); ops.textContent = '';
  for (const [path, item] of Object.entries(doc.paths)) for (const [method, op] of Object.entries(item)) {
    const div = document.createElement('div'); div.className = 'op';
    const head = document.createElement('div');
    head.innerHTML = '<span class="m ' + method + '">' + method + '</span> <code></code> ';
    head.querySelector('code').textContent = path;
    head.append(op.summary || '');
    div.append(head);
    const body = op.requestBody && op.requestBody.content && op.requestBody.content['application/json'];
    if (body) {
      const d = document.createElement('details'); const s = document.createElement('summary');
      s.textContent = 'Request body'; const pre = document.createElement('pre');
      pre.textContent = JSON.stringify(body.schema, null, 2); d.append(s, pre); div.append(d);
    }
    ops.append(div);
  }
  const d = document.createElement('details'); const s = document.createElement('summary');
  s.textContent = 'Schemas (predictions and task types)'; const pre = document.createElement('pre');
  pre.textContent = JSON.stringify(doc.components.schemas, null, 2); d.append(s, pre); ops.append(d);
});
</script></body></html>`;

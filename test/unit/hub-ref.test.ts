/** `hf://` references: what a pull asks the hub for, and the model name it defaults to. */
import { defaultModelName, formatHubRef, hubResolveUrl, parseHubRef } from '../../cli/hub-ref';

test('owner, repository and file; the revision is main unless @ names one', () => {
  expect(parseHubRef('hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf')).toEqual({
    owner: 'Qwen',
    repo: 'Qwen2.5-0.5B-Instruct-GGUF',
    revision: 'main',
    file: 'qwen2.5-0.5b-instruct-q4_k_m.gguf',
  });
  expect(parseHubRef('hf://a/b@v1.2/sub/dir/m.Q8_0.GGUF')).toEqual({
    owner: 'a',
    repo: 'b',
    revision: 'v1.2',
    file: 'sub/dir/m.Q8_0.GGUF',
  });
  const commit = '0123456789abcdef0123456789abcdef01234567';
  expect(parseHubRef(`hf://a/b@${commit}/m.gguf`).revision).toBe(commit);
});

test.each([
  ['https://huggingface.co/a/b/m.gguf', /not an hf:\/\/ reference/],
  ['hf://a/b', /no file path/],
  ['hf://a/b/', /no file path/],
  ['hf://a/b/../m.gguf', /no file path/],
  ['hf://a//m.gguf', /repository "" is not a hub name/],
  ['hf://-a/b/m.gguf', /owner "-a" is not a hub name/],
  ['hf://a/b+c/m.gguf', /repository "b\+c" is not a hub name/],
  ['hf://a/b@/m.gguf', /revision after @ is empty/],
  ['hf://a/b/model.safetensors', /only GGUF files/],
])('%s is refused, saying why', (ref, why) => {
  expect(() => parseHubRef(ref)).toThrow(why);
});

test('the resolve URL of the download protocol, each part escaped, any base without its trailing slash', () => {
  expect(hubResolveUrl('https://huggingface.co', parseHubRef('hf://a/b/m.gguf'))).toBe('https://huggingface.co/a/b/resolve/main/m.gguf');
  expect(hubResolveUrl('http://127.0.0.1:9/hub/', parseHubRef('hf://a/b@refs%2Fpr%2F1/dir/m q.gguf'))).toBe(
    'http://127.0.0.1:9/hub/a/b/resolve/refs%252Fpr%252F1/dir/m%20q.gguf',
  );
  expect(formatHubRef(parseHubRef('hf://a/b/dir/m.gguf'), 'abc123')).toBe('hf://a/b@abc123/dir/m.gguf');
});

test.each([
  ['hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF/m.gguf', 'qwen2.5-0.5b-instruct'],
  ['hf://bartowski/SmolLM2-135M-Instruct_gguf/m.gguf', 'smollm2-135m-instruct'],
  ['hf://a/Model.V2_x.gguf/m.gguf', 'model.v2_x'],
  ['hf://a/GGUF/m.gguf', 'gguf'],
])('%s is named %s by default', (ref, name) => {
  expect(defaultModelName(parseHubRef(ref))).toBe(name);
});

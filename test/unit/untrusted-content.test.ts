/** Which declared types a file is served with: only those a browser displays and never runs. */
import { servedContentType } from '../../api/untrusted-content';

test('passive types pass (without parameters); anything that could run is bytes', () => {
  expect(servedContentType('image/png')).toBe('image/png');
  expect(servedContentType('Text/Plain; charset=utf-8')).toBe('text/plain');
  expect(servedContentType('audio/wav')).toBe('audio/wav');
  expect(servedContentType('application/jsonl')).toBe('application/jsonl');
  for (const active of [
    'text/html',
    'image/svg+xml',
    'application/xhtml+xml',
    'text/xml',
    'application/xml',
    'text/javascript',
    'application/pdf',
    'text/html;x=image/png',
    'multipart/x-mixed-replace',
    '',
    'nonsense',
  ]) {
    expect(servedContentType(active)).toBe('application/octet-stream');
  }
});

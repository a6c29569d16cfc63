// The build command's checks: what componentize-js would report obscurely
// is refused first, with the fix.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('../bin/componentize.js', import.meta.url));
const wit = fileURLToPath(new URL('../../../wit', import.meta.url));

function build(source) {
  const dir = mkdtempSync(join(tmpdir(), 'kubewasm-componentize-test-'));
  const entry = join(dir, 'app.js');
  writeFileSync(entry, source);
  return spawnSync(process.execPath, [bin, entry, '--wit', wit, '--out', join(dir, 'out.wasm')], { encoding: 'utf8' });
}

test('an entry that does not export `plugin` is refused with the line to write', () => {
  const out = build("export const plugn = {};\n");
  assert.equal(out.status, 2);
  assert.match(out.stderr, /exports `plugn`, not `plugin`: end it with `export const plugin = exportPlugin/);
});

test('a host import without its version is refused with the versioned name', () => {
  const out = build("import * as cache from 'kubewasm:controller/cache';\nexport const plugin = { cache };\n");
  assert.equal(out.status, 2);
  assert.match(out.stderr, /imports 'kubewasm:controller\/cache', which the contract 0\.3\.0 does not provide: import 'kubewasm:controller\/cache@0\.3\.0'/);
});

test('an import of an older contract is refused too', () => {
  const out = build("import * as log from 'kubewasm:controller/log@0.2.0';\nexport const plugin = { log };\n");
  assert.equal(out.status, 2);
  assert.match(out.stderr, /'kubewasm:controller\/log@0\.2\.0'.*import 'kubewasm:controller\/log@0\.3\.0'/);
});

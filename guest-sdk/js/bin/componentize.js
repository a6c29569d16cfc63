#!/usr/bin/env node
// Builds a kubewasm plugin component from a JavaScript entry module:
// bundles it (and `@kubewasm/guest`) with esbuild, then runs
// componentize-js (StarlingMonkey) against the `controller` world.
//
//   kubewasm-componentize app.js --wit ../../wit --out plugin.wasm
//
// `fetch` (wasi:http) is disabled: plugins get no outgoing HTTP, and the
// host refuses a component that imports it. Never uses AoT (weval would
// download a binary at build time).

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

import { componentize } from '@bytecodealliance/componentize-js';
import { build } from 'esbuild';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { wit: { type: 'string' }, out: { type: 'string' }, world: { type: 'string', default: 'controller' } },
});
if (positionals.length !== 1 || !values.wit || !values.out) {
  console.error('usage: kubewasm-componentize ENTRY.js --wit WIT_DIR --out PLUGIN.wasm [--world NAME]');
  process.exit(2);
}

const dir = await mkdtemp(join(tmpdir(), 'kubewasm-js-'));
try {
  const bundled = join(dir, 'plugin.js');
  await build({
    entryPoints: [resolve(positionals[0])],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    external: ['kubewasm:*'],
    outfile: bundled,
    logLevel: 'warning',
  });
  const { component } = await componentize({
    sourcePath: bundled,
    witPath: resolve(values.wit),
    worldName: values.world,
    disableFeatures: ['http', 'fetch-event'],
  });
  await writeFile(resolve(values.out), component);
  console.error(`wrote ${values.out} (${component.byteLength} bytes)`);
} finally {
  await rm(dir, { recursive: true, force: true });
}

#!/usr/bin/env node
// Builds a kubewasm plugin component from a JavaScript entry module:
// bundles it (and `@kubewasm/guest`) with esbuild, then runs
// componentize-js (StarlingMonkey) against the `controller` world.
//
//   kubewasm-componentize app.js --out plugin.wasm [--wit WIT_DIR]
//
// The WIT defaults to the contract the package carries. Before the slow
// step it checks what componentize-js would report obscurely (an entry
// that does not export `plugin`, a host import without its version) and
// says the fix. `fetch` (wasi:http) is disabled: plugins get no outgoing
// HTTP, and the host refuses a component that imports it. Never uses AoT
// (weval would download a binary at build time).

import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { readFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { componentize } from '@bytecodealliance/componentize-js';
import { build } from 'esbuild';

const CONTRACT = '0.3.0';
const HOST_IMPORTS = ['cache', 'log'].map((name) => `kubewasm:controller/${name}@${CONTRACT}`);

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { wit: { type: 'string' }, out: { type: 'string' }, world: { type: 'string', default: 'controller' } },
});
if (positionals.length !== 1 || !values.out) {
  console.error('usage: kubewasm-componentize ENTRY.js --out PLUGIN.wasm [--wit WIT_DIR] [--world NAME]');
  process.exit(2);
}
const packaged = fileURLToPath(new URL('../wit', import.meta.url));
const wit = values.wit ?? packaged;
if (!existsSync(join(wit, 'controller.wit'))) {
  fail(`no WIT at ${wit}: pass --wit WIT_DIR, or install the package \`make sdk\` builds (it carries the WIT)`);
}

function fail(message) {
  console.error(`error: ${message}`);
  process.exit(2);
}

/** The fixes for what the bundle's entry exports and imports. */
function check(metafile, entry) {
  const [, output] = Object.entries(metafile.outputs).find(([file]) => file.endsWith('.js'));
  if (!output.exports.includes('plugin')) {
    const found = output.exports.length ? output.exports.map((e) => `\`${e}\``).join(', ') : 'nothing';
    fail(`${entry} exports ${found}, not \`plugin\`: end it with \`export const plugin = exportPlugin(reconciler, { cache, log });\``);
  }
  const imports = Object.values(metafile.inputs).flatMap((input) => input.imports);
  for (const { path } of imports.filter((i) => i.external && i.path.startsWith('kubewasm:'))) {
    if (!HOST_IMPORTS.includes(path)) {
      const name = path.replace(/^kubewasm:controller\//, '').replace(/@.*$/, '');
      const fix = ['cache', 'log'].includes(name)
        ? `import 'kubewasm:controller/${name}@${CONTRACT}' (the version is part of the name)`
        : `import only ${HOST_IMPORTS.map((i) => `'${i}'`).join(' and ')}`;
      fail(`${entry} imports '${path}', which the contract ${CONTRACT} does not provide: ${fix}`);
    }
  }
}

/**
 * The bundle's line table from esbuild's source map: for each line of the
 * bundle, the source file and line it came from (its first mapping), so the
 * SDK reports a failure at `plugin.js:12`, not at line 358 of the bundle.
 */
function sourceLines(map, bundleDir) {
  const digits = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const lines = [];
  let source = 0;
  let line = 0;
  for (const text of map.mappings.split(';')) {
    let first = null;
    for (const segment of text.split(',').filter(Boolean)) {
      const values = [];
      let value = 0;
      let shift = 0;
      for (const ch of segment) {
        const digit = digits.indexOf(ch);
        value += (digit & 31) << shift;
        if (digit & 32) {
          shift += 5;
        } else {
          values.push(value & 1 ? -(value >>> 1) : value >>> 1);
          value = 0;
          shift = 0;
        }
      }
      if (values.length >= 4) {
        source += values[1];
        line += values[2];
        first ??= [source, line + 1];
      }
    }
    lines.push(first);
  }
  const sources = map.sources.map((s) => relative(process.cwd(), resolve(bundleDir, s)));
  return { sources, lines };
}

const dir = await mkdtemp(join(tmpdir(), 'kubewasm-js-'));
try {
  const bundled = join(dir, 'plugin.js');
  const { metafile } = await build({
    entryPoints: [resolve(positionals[0])],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    external: ['kubewasm:*'],
    outfile: bundled,
    metafile: true,
    sourcemap: 'external',
    logLevel: 'warning',
  });
  check(metafile, positionals[0]);
  const map = JSON.parse(await readFile(`${bundled}.map`, 'utf8'));
  const table = JSON.stringify(sourceLines(map, dirname(bundled)));
  await writeFile(bundled, `${await readFile(bundled, 'utf8')}\nglobalThis.__kubewasmSourceLines = ${table};\n`);
  console.error(`building ${values.out} with componentize-js: StarlingMonkey and the bundle are compiled, 10 to 20 s...`);
  const started = Date.now();
  const { component } = await componentize({
    sourcePath: bundled,
    witPath: resolve(wit),
    worldName: values.world,
    disableFeatures: ['http', 'fetch-event'],
  });
  await writeFile(resolve(values.out), component);
  console.error(`wrote ${values.out} (${component.byteLength} bytes) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
} catch (e) {
  // esbuild has printed its own errors with file and line.
  if (e.errors === undefined) console.error(e);
  process.exitCode = 1;
} finally {
  await rm(dir, { recursive: true, force: true });
}

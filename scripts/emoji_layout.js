#!/usr/bin/env node
// Lays the emoji-datasource-<vendor> npm packages' 64x64 PNGs out as an image folder with
// one sub-folder per category (torchvision's ImageFolder, ganfw's data.dataset: folder), or
// checks such a folder. Used by scripts/fetch_emoji.sh.
//
//   node emoji_layout.js members EMOJI_JSON VENDOR      the tar members of VENDOR's images
//   node emoji_layout.js build EMOJI_JSON SRC DEST VERSION
//        SRC/package/img/<vendor>/64/<image> -> DEST/{train,test}/<category>/<vendor>_<image>,
//        then DEST/.manifest.json (written last: its presence means the layout is complete;
//        hidden, so that folder readers, which skip dot files, do not list it beside the splits)
//   node emoji_layout.js check DEST VERSION             exit 0 when every file of the manifest
//                                                       is there with its size
//   node emoji_layout.js counts DEST                    the table of images per split/category
//
// What is kept: every emoji of emoji.json (one entry per emoji, its `image` file) that a
// vendor draws (`has_img_<vendor>`), in every category but `Component` (the five skin-tone
// swatches: plain coloured squares, not drawings, too few for a class of their own and with
// no test image under the split below). Skin-tone variants (`skin_variations`) are left out:
// 1,875 recolourings of People & Body emoji that would make that class about six times the
// others, each a near copy of its base drawing.
//
// Test split, by emoji (all four vendors' drawings of one emoji fall on the same side):
// an emoji goes to test when the first 8 hex digits of the SHA-256 of its `unified` code
// (e.g. "1F600", "0023-FE0F-20E3"), read as an unsigned 32-bit number, are 0 modulo 10;
// about 10% of them. By shell: printf %s 1F600 | sha256sum | cut -c1-8.
// Category folder names: the category lowercased, every run of characters other than a-z
// and 0-9 made one "_" ("Smileys & Emotion" -> smileys_emotion).
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');

const VENDORS = ['apple', 'google', 'twitter', 'facebook'];
const DROPPED_CATEGORIES = new Set(['Component']);
const TEST_MODULUS = 10; // 1 emoji in 10 to test

function die(msg) {
  process.stderr.write(`emoji_layout: ${msg}\n`);
  process.exit(1);
}

function folderName(category) {
  return category.toLowerCase().replace(/[^a-z0-9]+/g, '_').replace(/^_+|_+$/g, '');
}

function isTest(unified) {
  const h = crypto.createHash('sha256').update(unified, 'ascii').digest();
  return h.readUInt32BE(0) % TEST_MODULUS === 0;
}

function readEmoji(file) {
  let list;
  try {
    list = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    die(`cannot read ${file}: ${e.message}`);
  }
  if (!Array.isArray(list) || list.length === 0)
    die(`${file}: expected a JSON array of emoji, as emoji-datasource's emoji.json`);
  for (const e of list)
    if (!e || typeof e.unified !== 'string' || typeof e.category !== 'string' ||
        typeof e.image !== 'string' || !/^[0-9a-f-]+\.png$/.test(e.image))
      die(`${file}: an entry lacks unified, category or a plain image name: ${JSON.stringify(e).slice(0, 200)}`);
  return list.filter((e) => !DROPPED_CATEGORIES.has(e.category));
}

// Every image to lay out: {vendor, image, split, category (folder name), rel (under DEST)}.
function plan(list, vendors) {
  const out = [];
  for (const v of vendors)
    for (const e of list) {
      if (e[`has_img_${v}`] !== true) continue;
      const split = isTest(e.unified) ? 'test' : 'train';
      const category = folderName(e.category);
      out.push({ vendor: v, image: e.image, split, category,
                 rel: `${split}/${category}/${v}_${e.image}` });
    }
  return out;
}

function vendorOf(name) {
  if (!VENDORS.includes(name)) die(`unknown vendor '${name}'; the vendors are ${VENDORS.join(', ')}`);
  return name;
}

function members(jsonFile, vendor) {
  for (const p of plan(readEmoji(jsonFile), [vendorOf(vendor)]))
    process.stdout.write(`package/img/${vendor}/64/${p.image}\n`);
}

function countsTable(files) {
  const splits = ['train', 'test'];
  const cats = [...new Set(files.map((f) => f.category))].sort();
  const n = {};
  for (const f of files) {
    const k = `${f.split}/${f.category}`;
    n[k] = (n[k] || 0) + 1;
  }
  const emoji = (s, c) => new Set(files.filter((f) => f.split === s && (!c || f.category === c))
                                       .map((f) => f.image)).size;
  const lines = [`${'category'.padEnd(16)} ${'train'.padStart(6)} ${'test'.padStart(6)}` +
                 `  (images; emoji train/test)`];
  for (const c of cats)
    lines.push(`${c.padEnd(16)} ${String(n[`train/${c}`] || 0).padStart(6)} ` +
               `${String(n[`test/${c}`] || 0).padStart(6)}  (${emoji('train', c)}/${emoji('test', c)})`);
  const tot = splits.map((s) => files.filter((f) => f.split === s).length);
  lines.push(`${'all'.padEnd(16)} ${String(tot[0]).padStart(6)} ${String(tot[1]).padStart(6)}` +
             `  (${emoji('train')}/${emoji('test')})`);
  return lines.join('\n');
}

function build(jsonFile, src, dest, version) {
  const files = plan(readEmoji(jsonFile), VENDORS);
  const made = new Set();
  for (const f of files) {
    const from = path.join(src, 'package', 'img', f.vendor, '64', f.image);
    const to = path.join(dest, f.rel);
    const dir = path.dirname(to);
    if (!made.has(dir)) fs.mkdirSync(dir, { recursive: true }), made.add(dir);
    try {
      fs.renameSync(from, to);
    } catch (e) {
      die(`cannot move ${from} to ${to}: ${e.message} (was it extracted from the tarball?)`);
    }
    f.bytes = fs.statSync(to).size;
    if (f.bytes < 8) die(`${to}: ${f.bytes} bytes, not a PNG`);
  }
  const manifest = {
    source: VENDORS.map((v) => `emoji-datasource-${v}@${version}`),
    version,
    image_size: 64,
    test_rule: `sha256(unified) first 4 bytes big-endian % ${TEST_MODULUS} == 0`,
    dropped_categories: [...DROPPED_CATEGORIES],
    skin_variations: 'left out',
    files: files.map((f) => ({ path: f.rel, bytes: f.bytes })),
  };
  const tmp = path.join(dest, '.manifest.json.tmp');
  fs.writeFileSync(tmp, JSON.stringify(manifest, null, 1) + '\n');
  fs.renameSync(tmp, path.join(dest, '.manifest.json'));
  process.stdout.write(countsTable(files) + '\n');
}

// The manifest's files as plan() rows (split and category from the path).
function readManifest(dest) {
  const file = path.join(dest, '.manifest.json');
  let m;
  try {
    m = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    return { error: `no readable ${file} (${e.code || e.message})` };
  }
  if (!m || !Array.isArray(m.files) || m.files.length === 0)
    return { error: `${file} lists no files` };
  const files = m.files.map((f) => {
    const [split, category, name] = String(f.path).split('/');
    return { split, category, image: name.replace(/^[a-z]+_/, ''), rel: f.path, bytes: f.bytes };
  });
  return { m, files };
}

function check(dest, version) {
  const { m, files, error } = readManifest(dest);
  if (error) die(error);
  if (m.version !== version) die(`${dest} holds version ${m.version}, not ${version}`);
  for (const f of files) {
    let st;
    try {
      st = fs.statSync(path.join(dest, f.rel));
    } catch (e) {
      die(`${path.join(dest, f.rel)} is missing`);
    }
    if (st.size !== f.bytes) die(`${path.join(dest, f.rel)} has ${st.size} bytes, not ${f.bytes}`);
  }
  const n = (s) => files.filter((f) => f.split === s).length;
  process.stdout.write(`${n('train')} train + ${n('test')} test images\n`);
}

function counts(dest) {
  const { files, error } = readManifest(dest);
  if (error) die(error);
  process.stdout.write(countsTable(files) + '\n');
}

const [cmd, ...args] = process.argv.slice(2);
const need = { members: 2, build: 4, check: 2, counts: 1 };
if (!(cmd in need) || args.length !== need[cmd])
  die('usage: emoji_layout.js members EMOJI_JSON VENDOR | build EMOJI_JSON SRC DEST VERSION | ' +
      'check DEST VERSION | counts DEST');
({ members, build, check, counts })[cmd](...args);

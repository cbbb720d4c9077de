#!/usr/bin/env node
// Hugging Face tokenizers as transformers.js runs them (@lenml/tokenizers, its tokenizer-only port) as
// the reference for Ember's C++ tokenizer (text/tokenizer.hpp). A test-time tool: `ember` never loads it.
//
//   node tools/tokenizer_reference.js DIR CORPUS.json
//
// DIR holds tokenizer.json and tokenizer_config.json (an @lenml/tokenizer-* package's models/ folder);
// CORPUS.json is a JSON list of strings (and, for the generation tests, of {"decode": [ids]}: the ids'
// text, special tokens skipped, spaces not cleaned up, as Ember's streams send it; and of
// {"chat": [{role, content}...]}: the ids of the tokenizer's chat template applied with the
// generation prompt, as transformers' apply_chat_template gives them). Prints one JSON object:
//   {"vocab_size": N, "bos_id": id|null, "eos_id": id|null,
//    "cases": [{"text": T, "ids": encode(T), "ids_plain": encode(T, add_special_tokens false),
//               "decoded": decode(ids), "decoded_skip": decode(ids, skip_special_tokens),
//               "decoded_clean": decode(ids) with the config's clean_up_tokenization_spaces}, ...]}
// where decoded and decoded_skip never clean up spaces. (transformers.js refuses to decode an empty
// list; its text is "" here.)
//
// Where @lenml/tokenizers comes from: $EMBER_NPM_DIR/node_modules (default ~/.cache/ember-npm),
// installed by deploy/setup.sh at the version pinned there. Exit status: 0 done, 2 bad arguments or
// files, 77 the package is not installed (a test reports SKIP).
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');

const NPM_DIR = process.env.EMBER_NPM_DIR || path.join(os.homedir(), '.cache', 'ember-npm');

function fail(message, code = 2) {
  process.stderr.write(`tokenizer_reference: ${message}\n`);
  process.exit(code);
}

function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    return fail(`${file}: ${e.message}`);
  }
}

function main() {
  const [dir, corpusFile] = process.argv.slice(2);
  if (!dir || !corpusFile) fail('usage: tokenizer_reference.js DIR CORPUS.json');
  let lenml;
  try {
    lenml = require(path.join(NPM_DIR, 'node_modules', '@lenml', 'tokenizers'));
  } catch (e) {
    fail(`@lenml/tokenizers is not installed under ${NPM_DIR} (deploy/setup.sh installs it): ${e.message}`, 77);
  }
  const tokenizer = lenml.TokenizerLoader.fromPreTrained({
    tokenizerJSON: readJson(path.join(dir, 'tokenizer.json')),
    tokenizerConfig: readJson(path.join(dir, 'tokenizer_config.json')),
  });
  const texts = readJson(corpusFile);
  const isIds = (v) => Array.isArray(v) && v.every((x) => Number.isInteger(x));
  const valid = (t) => typeof t === 'string' || (t && isIds(t.decode)) || (t && Array.isArray(t.chat));
  if (!Array.isArray(texts) || !texts.every(valid)) fail(`${corpusFile}: not a list of strings, {"decode"} and {"chat"}`);
  const decode = (ids, args) => (ids.length === 0 ? '' : tokenizer.decode(ids, args));
  const cases = texts.map((text) => {
    if (typeof text !== 'string' && text.decode) {
      return { ids: text.decode, decoded_skip: decode(text.decode, { skip_special_tokens: true, clean_up_tokenization_spaces: false }) };
    }
    if (typeof text !== 'string') {
      return { ids: Array.from(tokenizer.apply_chat_template(text.chat, { tokenize: true, add_generation_prompt: true })) };
    }
    const ids = tokenizer.encode(text);
    return {
      text,
      ids,
      ids_plain: tokenizer.encode(text, { add_special_tokens: false }),
      decoded: decode(ids, { clean_up_tokenization_spaces: false }),
      decoded_skip: decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false }),
      decoded_clean: decode(ids, {}),
    };
  });
  let vocabSize = 0;
  for (const id of tokenizer.model.tokens_to_ids.values()) vocabSize = Math.max(vocabSize, id + 1);
  const id = (v) => (v === undefined || v === null ? null : v);
  process.stdout.write(JSON.stringify({
    vocab_size: vocabSize, bos_id: id(tokenizer.bos_token_id), eos_id: id(tokenizer.eos_token_id), cases,
  }) + '\n');
}

main();

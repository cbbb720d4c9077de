#!/usr/bin/env node
// OpenAI's official Node client (the npm package `openai`, Apache-2.0) against Ember's HTTP front
// end: it must parse every answer and every streamed chunk. Run by openai_client_test.cpp, which
// starts the front end on loopback in front of a scripted GenerationService whose scripts this file
// knows (see that test):
//
//   node openai_client_check.js --port PORT
//
// Where the package comes from: $EMBER_NPM_DIR/node_modules (default ~/.cache/ember-npm), installed
// by deploy/setup.sh at the version pinned there. Exit status: 0 every check passed (one line of
// JSON on stdout says what was checked), 1 a check failed (the reason on stderr), 2 bad arguments,
// 77 the package is not installed (the test reports SKIP).
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { createRequire } = require('module');

const NPM_DIR = process.env.EMBER_NPM_DIR || path.join(os.homedir(), '.cache', 'ember-npm');

function fail(message, code = 1) {
  process.stderr.write(`openai_client_check: ${message}\n`);
  process.exit(code);
}

function check(condition, what) {
  if (!condition) throw new Error(what);
}

function loadOpenAI() {
  try {
    return createRequire(path.join(NPM_DIR, 'package.json'))('openai');
  } catch (e) {
    fail(`the npm package 'openai' is not in ${NPM_DIR}/node_modules (deploy/setup.sh installs it): ${e.message}`, 77);
  }
  return null;
}

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

async function expectError(promise, status, what) {
  try {
    const got = await promise;
    if (got && typeof got[Symbol.asyncIterator] === 'function') await collect(got);
  } catch (e) {
    check(e.status === status, `${what}: status ${e.status}, expected ${status} (${e.message})`);
    return e;
  }
  throw new Error(`${what}: no error`);
}

async function main() {
  const at = process.argv.indexOf('--port');
  const port = at > 0 ? Number(process.argv[at + 1]) : NaN;
  if (!Number.isInteger(port) || port <= 0) fail('usage: node openai_client_check.js --port PORT', 2);
  const mod = loadOpenAI();
  const OpenAI = mod.OpenAI || mod.default || mod;
  const errors = {
    APIError: mod.APIError || OpenAI.APIError,
    BadRequestError: mod.BadRequestError || OpenAI.BadRequestError,
    NotFoundError: mod.NotFoundError || OpenAI.NotFoundError,
  };
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 20000 });
  const done = [];

  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === 'gpt2', `models: ${JSON.stringify(models.data)}`);
  done.push('models');

  const completion = await client.completions.create({ model: 'gpt2', prompt: 'Say hi', max_tokens: 5, temperature: 0 });
  check(completion.object === 'text_completion', `completion object ${completion.object}`);
  check(completion.choices[0].text === 'Hello, world', `completion text ${JSON.stringify(completion.choices[0].text)}`);
  check(completion.choices[0].finish_reason === 'stop', `completion finish ${completion.choices[0].finish_reason}`);
  check(completion.usage.total_tokens === 7, `completion usage ${JSON.stringify(completion.usage)}`);
  done.push('completion');

  const chunks = await collect(await client.completions.create({
    model: 'gpt2', prompt: [15496, 11], max_tokens: 5, stream: true, stream_options: { include_usage: true },
  }));
  const text = chunks.filter((c) => c.choices.length).map((c) => c.choices[0].text).join('');
  check(text === 'Hello, world', `streamed completion text ${JSON.stringify(text)}`);
  check(chunks.some((c) => c.choices.length && c.choices[0].finish_reason === 'stop'), 'streamed completion: no finish');
  const last = chunks[chunks.length - 1];
  check(last.choices.length === 0 && last.usage && last.usage.completion_tokens === 3,
    `streamed completion usage ${JSON.stringify(last)}`);
  done.push('completion stream');

  const chat = await client.chat.completions.create({
    model: 'gpt2', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }],
    max_completion_tokens: 8, logprobs: true, top_logprobs: 2, seed: 3,
  });
  check(chat.object === 'chat.completion', `chat object ${chat.object}`);
  check(chat.choices[0].message.role === 'assistant', `chat role ${chat.choices[0].message.role}`);
  check(chat.choices[0].message.content === 'Hello, world', `chat content ${chat.choices[0].message.content}`);
  const lp = chat.choices[0].logprobs.content;
  check(lp.length === 3 && lp[0].token === 'Hello' && lp[0].top_logprobs.length === 2, `chat logprobs ${JSON.stringify(lp)}`);
  done.push('chat');

  const deltas = await collect(await client.chat.completions.create({
    model: 'gpt2', messages: [{ role: 'user', content: 'Hi' }], stream: true,
  }));
  check(deltas[0].choices[0].delta.role === 'assistant', `chat stream role ${JSON.stringify(deltas[0])}`);
  const content = deltas.map((d) => d.choices[0].delta.content || '').join('');
  check(content === 'Hello, world', `chat stream content ${JSON.stringify(content)}`);
  check(deltas[deltas.length - 1].choices[0].finish_reason === 'stop', 'chat stream: no finish');
  done.push('chat stream');

  const unknown = await expectError(client.completions.create({ model: 'nope', prompt: 'x' }), 404, 'unknown model');
  check(unknown instanceof errors.NotFoundError, `unknown model: ${unknown.constructor.name}`);
  check(/unknown model 'nope'/.test(unknown.message), `unknown model message: ${unknown.message}`);
  const bad = await expectError(client.completions.create({ model: 'gpt2', prompt: 'x', n: 2 }), 400, 'n=2');
  check(bad instanceof errors.BadRequestError && bad.param === 'n', `n=2: ${bad.constructor.name} ${bad.param}`);
  const extra = await expectError(client.chat.completions.create({
    model: 'gpt2', messages: [{ role: 'user', content: 'x' }], temprature: 1,
  }), 400, 'unknown field');
  check(/unknown field 'temprature'/.test(extra.message), `unknown field message: ${extra.message}`);
  done.push('errors before the first token');

  let seen = '';
  try {
    for await (const c of await client.chat.completions.create({
      model: 'gpt2', messages: [{ role: 'user', content: 'fail after one' }], stream: true,
    })) {
      seen += c.choices[0].delta.content || '';
    }
    throw new Error('an error after the first token: the stream ended without one');
  } catch (e) {
    check(e instanceof errors.APIError, `error after the first token: ${e.constructor.name}: ${e.message}`);
    check(/node lost/.test(e.message), `error after the first token: ${e.message}`);
  }
  check(seen === 'Hello world', `before the error: ${JSON.stringify(seen)}`);
  done.push('error after the first token');

  let version = 'unknown';
  try {
    version = JSON.parse(fs.readFileSync(path.join(NPM_DIR, 'node_modules', 'openai', 'package.json'), 'utf8')).version;
  } catch (e) {
    // the version is only reported
  }
  process.stdout.write(JSON.stringify({ openai: version, checked: done }) + '\n');
}

main().catch((e) => fail(e.stack || String(e)));

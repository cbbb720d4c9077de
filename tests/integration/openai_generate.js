#!/usr/bin/env node
// OpenAI's official Node client (the npm package `openai`) as a real user runs it against a live
// `ember serve` or `ember gateway`: the generation tests (generation_test.py) hand it a list of jobs
// and compare what it printed with PyTorch's tokens.
//
//   node openai_generate.js --port PORT --jobs JOBS.json
//
// JOBS.json: a list of {"api": "completions" | "chat", "model", "prompt" (a string or token ids) |
// "messages", "max_tokens", "stream" (bool), and optional "seed", "temperature", "stop",
// "extra" (merged into the body as is, e.g. {"ignore_eos": true})}. Prints one JSON list, one entry
// per job: {"text", "finish_reason", "usage", "chunks" (streamed: the chunks with text)} or
// {"error": {"status", "message"}}.
//
// Where the package comes from: $EMBER_NPM_DIR/node_modules (default ~/.cache/ember-npm), installed by
// deploy/setup.sh. Exit status: 0 done (errors of single jobs are in the output), 2 bad arguments, 77
// the package is not installed (the test reports SKIP).
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { createRequire } = require('module');

const NPM_DIR = process.env.EMBER_NPM_DIR || path.join(os.homedir(), '.cache', 'ember-npm');

function fail(message, code = 2) {
  process.stderr.write(`openai_generate: ${message}\n`);
  process.exit(code);
}

function arg(name) {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : undefined;
}

async function run(client, job) {
  const body = { model: job.model, max_tokens: job.max_tokens, temperature: job.temperature ?? 0 };
  if (job.seed !== undefined) body.seed = job.seed;
  if (job.stop !== undefined) body.stop = job.stop;
  Object.assign(body, job.extra || {});
  const chat = job.api === 'chat';
  if (chat) body.messages = job.messages;
  else body.prompt = job.prompt;
  const api = chat ? client.chat.completions : client.completions;
  try {
    if (!job.stream) {
      const r = await api.create(body);
      const c = r.choices[0];
      return { text: chat ? c.message.content : c.text, finish_reason: c.finish_reason, usage: r.usage };
    }
    body.stream = true;
    body.stream_options = { include_usage: true };
    const stream = await api.create(body);
    let text = '';
    let finish = null;
    let usage = null;
    let chunks = 0;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices || []) {
        const piece = chat ? (c.delta && c.delta.content) || '' : c.text || '';
        if (piece) chunks += 1;
        text += piece;
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    return { text, finish_reason: finish, usage, chunks };
  } catch (e) {
    return { error: { status: e.status ?? null, message: String(e.message) } };
  }
}

async function main() {
  const port = Number(arg('--port'));
  const jobsFile = arg('--jobs');
  if (!Number.isInteger(port) || port <= 0 || !jobsFile) fail('usage: node openai_generate.js --port PORT --jobs JOBS.json');
  let OpenAI;
  try {
    OpenAI = createRequire(path.join(NPM_DIR, 'package.json'))('openai');
  } catch (e) {
    fail(`the npm package 'openai' is not in ${NPM_DIR}/node_modules (deploy/setup.sh installs it): ${e.message}`, 77);
  }
  const jobs = JSON.parse(fs.readFileSync(jobsFile, 'utf8'));
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
  const out = [];
  for (const job of jobs) out.push(await run(client, job));
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => fail(e.stack || String(e), 1));

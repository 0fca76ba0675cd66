// SPDX-License-Identifier: GPL-2.0-or-later
// Runs background.js against a fake WebExtension API (a fake: no browser here) and checks what it
// sends to the native host. Run by Tests/BatonClientTests/ExtensionBackgroundTests.swift with node.
"use strict";
const fs = require("fs");
const path = require("path");
const vm = require("vm");
const assert = require("assert");

function fakeBrowser() {
  const listeners = {};
  const event = (name) => ({ addListener: (f) => { (listeners[name] ||= []).push(f); } });
  const sent = [];
  const state = {
    window: { id: 1, focused: true, incognito: false },
    tab: { id: 7, active: true, incognito: false, url: "https://example.org/a", title: "A" },
    contentScriptReady: false,
    scroll: { scrollX: 0, scrollY: 640 },
  };
  const chrome = {
    runtime: {
      lastError: undefined,
      connectNative: () => ({
        postMessage: (m) => sent.push(m),
        onMessage: event("port.message"),
        onDisconnect: event("port.disconnect"),
      }),
      onMessage: event("runtime.message"),
    },
    windows: { getLastFocused: async () => state.window, onFocusChanged: event("windows.focus") },
    tabs: {
      query: async () => [state.tab],
      sendMessage: (tabId, message, reply) => {
        // Before the content script is injected there is nobody to answer.
        setTimeout(() => reply(state.contentScriptReady ? state.scroll : undefined), 0);
      },
      create: async () => ({ id: 8 }),
      onActivated: event("tabs.activated"),
      onUpdated: event("tabs.updated"),
      onRemoved: event("tabs.removed"),
    },
  };
  const fire = (name, ...args) => (listeners[name] || []).map((f) => f(...args));
  return { chrome, sent, state, fire };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

async function contentScriptAfterCompleteStillReportsScroll() {
  const fake = fakeBrowser();
  const source = fs.readFileSync(path.join(__dirname, "..", "extension", "background.js"), "utf8");
  vm.runInNewContext(source, { chrome: fake.chrome, setTimeout, JSON, Promise, Map, Math });
  await settle();
  // The tab finishes loading before the content script (document_idle) is there.
  fake.fire("tabs.updated", 7, { status: "complete" }, fake.state.tab);
  await settle();
  const first = fake.sent.at(-1);
  assert.strictEqual(first.kind, "current");
  assert.strictEqual(first.scrollY, undefined, "no content script yet, so no scroll position");
  // Then the content script arrives and says so.
  fake.state.contentScriptReady = true;
  fake.fire("runtime.message", { kind: "loaded" }, { tab: fake.state.tab }, () => {});
  await settle();
  const last = fake.sent.at(-1);
  assert.strictEqual(last.kind, "current");
  assert.strictEqual(last.scrollY, 640, "the page's scroll position, once the page can answer");
}

async function loadedInABackgroundTabReportsNothing() {
  const fake = fakeBrowser();
  const source = fs.readFileSync(path.join(__dirname, "..", "extension", "background.js"), "utf8");
  vm.runInNewContext(source, { chrome: fake.chrome, setTimeout, JSON, Promise, Map, Math });
  await settle();
  const before = fake.sent.length;
  fake.state.contentScriptReady = true;
  fake.fire("runtime.message", { kind: "loaded" }, { tab: { id: 9, active: false, incognito: false } }, () => {});
  await settle();
  assert.strictEqual(fake.sent.length, before, "a tab loading in the background changes nothing");
}

(async () => {
  for (const test of [contentScriptAfterCompleteStillReportsScroll, loadedInABackgroundTabReportsNothing]) {
    try {
      await test();
      console.log("ok " + test.name);
    } catch (error) {
      console.log("FAIL " + test.name + ": " + error.message);
      process.exitCode = 1;
    }
  }
})();

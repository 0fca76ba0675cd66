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
  const asked = [];
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
        onMessage: { addListener: (f) => { (listeners["port.message"] ||= []).push(f); } },
        onDisconnect: event("port.disconnect"),
      }),
      onMessage: event("runtime.message"),
    },
    windows: { getLastFocused: async () => state.window, onFocusChanged: event("windows.focus") },
    tabs: {
      query: async () => [state.tab],
      sendMessage: (tabId, message, reply) => {
        asked.push({ tabId, message });
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
  return { chrome, sent, asked, state, fire };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

async function contentScriptAfterCompleteStillReportsScroll() {
  const fake = fakeBrowser();
  const source = fs.readFileSync(path.join(__dirname, "..", "extension", "background.js"), "utf8");
  vm.runInNewContext(source, { chrome: fake.chrome, setTimeout, JSON, Promise, Map, Math, Date, Object });
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
  vm.runInNewContext(source, { chrome: fake.chrome, setTimeout, JSON, Promise, Map, Math, Date, Object });
  await settle();
  const before = fake.sent.length;
  fake.state.contentScriptReady = true;
  fake.fire("runtime.message", { kind: "loaded" }, { tab: { id: 9, active: false, incognito: false } }, () => {});
  await settle();
  assert.strictEqual(fake.sent.length, before, "a tab loading in the background changes nothing");
}

function load() {
  const fake = fakeBrowser();
  const source = fs.readFileSync(path.join(__dirname, "..", "extension", "background.js"), "utf8");
  vm.runInNewContext(source, { chrome: fake.chrome, setTimeout, JSON, Promise, Map, Math, Date, Object });
  return fake;
}

async function mediaGoesWithThePageAndEachChangeIsReported() {
  const fake = load();
  await settle();
  fake.state.contentScriptReady = true;
  fake.state.scroll = { scrollX: 0, scrollY: 10, media: { time: 42.5, playing: true, rate: 1, duration: 600 } };
  fake.fire("tabs.updated", 7, { status: "complete" }, fake.state.tab);
  await settle();
  let last = fake.sent.at(-1);
  assert.deepStrictEqual([last.mediaTime, last.mediaPlaying, last.mediaRate, last.mediaDuration], [42.5, true, 1, 600]);
  // Paused (a live stream has no finite duration): the content script says "media" and the page is reported again.
  fake.state.scroll = { scrollX: 0, scrollY: 10, media: { time: 50, playing: false, rate: 1 } };
  fake.fire("runtime.message", { kind: "media" }, { tab: fake.state.tab }, () => {});
  await settle();
  last = fake.sent.at(-1);
  assert.deepStrictEqual([last.mediaTime, last.mediaPlaying, "mediaDuration" in last], [50, false, false]);
  // Without a media element the page goes as before, without media members.
  fake.state.scroll = { scrollX: 0, scrollY: 10, media: null };
  fake.fire("runtime.message", { kind: "media" }, { tab: fake.state.tab }, () => {});
  await settle();
  last = fake.sent.at(-1);
  assert.strictEqual("mediaTime" in last, false);
  // A media change in a background tab reports nothing.
  const before = fake.sent.length;
  fake.fire("runtime.message", { kind: "media" }, { tab: { id: 9, active: false, incognito: false } }, () => {});
  await settle();
  assert.strictEqual(fake.sent.length, before);
}

async function aContinuedPageGetsItsMediaTimeWhenItLoads() {
  const fake = load();
  await settle();
  const before = Date.now();
  fake.fire("port.message", { kind: "open", url: "https://example.org/video.html", scrollY: 300, mediaTime: 102, mediaPlaying: true, mediaRate: 1 });
  await settle();
  let answer;
  fake.fire("runtime.message", { kind: "loaded" }, { tab: { id: 8, active: true, incognito: false } }, (a) => { answer = a; });
  assert.strictEqual(answer.scrollY, 300);
  assert.deepStrictEqual([answer.media.time, answer.media.playing, answer.media.rate], [102, true, 1]);
  assert.ok(answer.media.openedAt >= before && answer.media.openedAt <= Date.now(), "when the open request came, on this clock");
  // Given once: a reload of that tab restores nothing again.
  let again = "unset";
  fake.fire("runtime.message", { kind: "loaded" }, { tab: { id: 8, active: true, incognito: false } }, (a) => { again = a; });
  assert.strictEqual(again, null);
  // A URL that carries the time (the host said no mediaTime): nothing for the page to seek.
  fake.fire("port.message", { kind: "open", url: "https://www.youtube.com/watch?v=a&t=102" });
  await settle();
  fake.fire("runtime.message", { kind: "loaded" }, { tab: { id: 8, active: true, incognito: false } }, (a) => { again = a; });
  assert.strictEqual(again, null);
}

async function continuedElsewhereThePublishedTabIsAskedToPause() {
  const fake = load();
  await settle();
  fake.state.contentScriptReady = true;
  fake.fire("tabs.updated", 7, { status: "complete" }, fake.state.tab);
  await settle();
  fake.fire("port.message", { kind: "pause" });
  // The user then moved to another tab, which was reported: that one is asked next time.
  fake.state.tab = { id: 9, active: true, incognito: false, url: "https://example.org/b", title: "B" };
  fake.fire("tabs.activated", { tabId: 9 });
  await settle();
  fake.fire("port.message", { kind: "pause" });
  assert.deepStrictEqual(fake.asked.filter((a) => a.message.kind === "pause").map((a) => a.tabId), [7, 9]);
}

(async () => {
  for (const test of [contentScriptAfterCompleteStillReportsScroll, loadedInABackgroundTabReportsNothing,
                      mediaGoesWithThePageAndEachChangeIsReported, aContinuedPageGetsItsMediaTimeWhenItLoads,
                      continuedElsewhereThePublishedTabIsAskedToPause]) {
    try {
      await test();
      console.log("ok " + test.name);
    } catch (error) {
      console.log("FAIL " + test.name + ": " + error.message);
      process.exitCode = 1;
    }
  }
})();

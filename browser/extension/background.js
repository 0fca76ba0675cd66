// SPDX-License-Identifier: GPL-2.0-or-later
// Baton: the active tab of the focused window is the user's current activity (docs/publishers.md),
// with the time of the media it plays (docs/media.md).
// One source for Chromium (service worker) and Firefox (event page).
"use strict";

const api = globalThis.browser ?? globalThis.chrome;
const HOST = "org.baton.browser_host";

let port = null;
let retryDelay = 1000;
let lastReport = "";
/** The tab whose page was last reported: its media pauses when the page is continued elsewhere. */
let reportedTab = null;
/** tabId -> {scrollX, scrollY, media} to restore once a page opened for a continuation has loaded. */
const pendingRestore = new Map();

function isWebURL(url) {
  return typeof url === "string" && /^https?:\/\//i.test(url);
}

function send(message) {
  const text = JSON.stringify(message);
  if (text === lastReport || !port) return;
  lastReport = text;
  port.postMessage(message);
}

function resign() {
  send({ kind: "resign" });
}

function connect() {
  try {
    port = api.runtime.connectNative(HOST);
  } catch (error) {
    port = null;
    setTimeout(connect, retryDelay);
    return;
  }
  lastReport = "";
  port.onMessage.addListener(onHostMessage);
  port.onDisconnect.addListener(() => {
    // The host is gone (Baton not installed, or it stopped): try again later, less and less often.
    port = null;
    retryDelay = Math.min(retryDelay * 2, 5 * 60 * 1000);
    setTimeout(connect, retryDelay);
  });
  report();
}

/** The scroll position and media state the page's content script knows, or nothing when the page
 * does not allow it. */
function askState(tabId) {
  return new Promise((resolve) => {
    try {
      api.tabs.sendMessage(tabId, { kind: "state?" }, (answer) => {
        void api.runtime.lastError; // no content script there (e.g. a store page): no scroll position
        resolve(answer && typeof answer.scrollY === "number" ? answer : null);
      });
    } catch (error) {
      resolve(null);
    }
  });
}

/** Reports the active tab of the focused window, or resigns when there is none to report. */
async function report() {
  if (!port) return;
  let window;
  try {
    window = await api.windows.getLastFocused({});
  } catch (error) {
    resign();
    return;
  }
  // Private windows never publish (the extension is not allowed in them either).
  if (!window || !window.focused || window.incognito) return resign();
  const [tab] = await api.tabs.query({ active: true, windowId: window.id });
  if (!tab || tab.incognito || !isWebURL(tab.url)) return resign();
  const state = await askState(tab.id);
  reportedTab = tab.id;
  const message = { kind: "current", title: tab.title || "", url: tab.url };
  if (state) {
    message.scrollX = state.scrollX;
    message.scrollY = state.scrollY;
    // The playing (or last played) media element: the host stamps the time it gets this.
    const media = state.media;
    if (media && typeof media.time === "number") {
      message.mediaTime = media.time;
      message.mediaPlaying = media.playing === true;
      message.mediaRate = media.rate;
      if (typeof media.duration === "number") message.mediaDuration = media.duration;
    }
  }
  send(message);
}

function onHostMessage(message) {
  if (message && message.kind === "pause") {
    // The page was continued on another machine: its media pauses here (the tab stays open).
    if (reportedTab !== null) {
      try {
        api.tabs.sendMessage(reportedTab, { kind: "pause" }, () => void api.runtime.lastError);
      } catch (error) {
        // The tab is gone: nothing plays there any more.
      }
    }
    return;
  }
  if (!message || message.kind !== "open" || !isWebURL(message.url)) return;
  // The media time goes to the page when its URL could not carry it; the page's load time is added
  // while the media played (openedAt, this machine's clock).
  const openedAt = Date.now();
  api.tabs.create({ url: message.url, active: true }).then((tab) => {
    const restore = {};
    if (typeof message.scrollY === "number") {
      restore.scrollX = message.scrollX || 0;
      restore.scrollY = message.scrollY;
    }
    if (typeof message.mediaTime === "number") {
      restore.media = { time: message.mediaTime, playing: message.mediaPlaying === true, rate: message.mediaRate, openedAt };
    }
    if (Object.keys(restore).length > 0) pendingRestore.set(tab.id, restore);
  });
}

api.tabs.onActivated.addListener(() => report());
api.tabs.onUpdated.addListener((tabId, change, tab) => {
  if (tab.active && (change.url || change.title || change.status === "complete")) report();
});
api.tabs.onRemoved.addListener((tabId) => {
  pendingRestore.delete(tabId);
  report();
});
api.windows.onFocusChanged.addListener(() => report());
api.runtime.onMessage.addListener((message, sender, sendResponse) => {
  if (!sender.tab || sender.tab.incognito) return false;
  if (message && message.kind === "loaded") {
    const restore = pendingRestore.get(sender.tab.id) || null;
    pendingRestore.delete(sender.tab.id);
    sendResponse(restore);
    // The content script can arrive after the tab's "complete" event, whose report then had no
    // scroll position to give: report again now that the page can answer.
    if (sender.tab.active) report();
    return false;
  }
  // Scrolled (at most once a second) or the page's media changed (played, paused, seeked, rate).
  if (message && (message.kind === "scrolled" || message.kind === "media") && sender.tab.active) report();
  return false;
});

connect();

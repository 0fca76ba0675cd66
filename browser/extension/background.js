// SPDX-License-Identifier: GPL-2.0-or-later
// Baton: the active tab of the focused window is the user's current activity (docs/publishers.md).
// One source for Chromium (service worker) and Firefox (event page).
"use strict";

const api = globalThis.browser ?? globalThis.chrome;
const HOST = "org.baton.browser_host";

let port = null;
let retryDelay = 1000;
let lastReport = "";
/** tabId -> {scrollX, scrollY} to restore once a page opened for a continuation has loaded. */
const pendingScroll = new Map();

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

/** The scroll position the page's content script knows, or nothing when the page does not allow it. */
function askScroll(tabId) {
  return new Promise((resolve) => {
    try {
      api.tabs.sendMessage(tabId, { kind: "scroll?" }, (answer) => {
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
  const scroll = await askScroll(tab.id);
  const message = { kind: "current", title: tab.title || "", url: tab.url };
  if (scroll) {
    message.scrollX = scroll.scrollX;
    message.scrollY = scroll.scrollY;
  }
  send(message);
}

function onHostMessage(message) {
  if (!message || message.kind !== "open" || !isWebURL(message.url)) return;
  api.tabs.create({ url: message.url, active: true }).then((tab) => {
    if (typeof message.scrollY === "number") {
      pendingScroll.set(tab.id, { scrollX: message.scrollX || 0, scrollY: message.scrollY });
    }
  });
}

api.tabs.onActivated.addListener(() => report());
api.tabs.onUpdated.addListener((tabId, change, tab) => {
  if (tab.active && (change.url || change.title || change.status === "complete")) report();
});
api.tabs.onRemoved.addListener((tabId) => {
  pendingScroll.delete(tabId);
  report();
});
api.windows.onFocusChanged.addListener(() => report());
api.runtime.onMessage.addListener((message, sender, sendResponse) => {
  if (!sender.tab || sender.tab.incognito) return false;
  if (message && message.kind === "loaded") {
    const scroll = pendingScroll.get(sender.tab.id) || null;
    pendingScroll.delete(sender.tab.id);
    sendResponse(scroll);
    // The content script can arrive after the tab's "complete" event, whose report then had no
    // scroll position to give: report again now that the page can answer.
    if (sender.tab.active) report();
    return false;
  }
  if (message && message.kind === "scrolled" && sender.tab.active) report();
  return false;
});

connect();

// SPDX-License-Identifier: GPL-2.0-or-later
// Baton: tells the extension where the page is scrolled, and restores the position of a page
// continued from another machine. Runs only on http(s) pages; never in private windows.
"use strict";

(() => {
  const api = globalThis.browser ?? globalThis.chrome;
  let timer = null;

  api.runtime.onMessage.addListener((message, sender, sendResponse) => {
    if (message && message.kind === "scroll?") {
      sendResponse({ scrollX: Math.round(window.scrollX), scrollY: Math.round(window.scrollY) });
    }
    return false;
  });

  // Settled scroll positions only: one report a second at most.
  window.addEventListener("scroll", () => {
    if (timer) return;
    timer = setTimeout(() => {
      timer = null;
      api.runtime.sendMessage({ kind: "scrolled" }).catch(() => {});
    }, 1000);
  }, { passive: true });

  api.runtime.sendMessage({ kind: "loaded" }).then((scroll) => {
    if (scroll && typeof scroll.scrollY === "number") window.scrollTo(scroll.scrollX || 0, scroll.scrollY);
  }).catch(() => {});
})();

// SPDX-License-Identifier: GPL-2.0-or-later
// Baton: tells the extension where the page is scrolled and where its media plays, and restores
// both on a page continued from another machine. Runs only on http(s) pages; never in private
// windows. No timer runs unless the user scrolls or a media element changes (docs/media.md).
"use strict";

(() => {
  const api = globalThis.browser ?? globalThis.chrome;
  let scrollTimer = null;
  let mediaTimer = null;
  /** The media element that last started playing: the one reported while none plays. */
  let lastPlayed = null;

  /** A media element someone watches or listens to: not a muted loop (a page's moving decoration). */
  function isMedia(node) {
    return node instanceof HTMLMediaElement && !(node.muted && node.loop);
  }

  function isPlaying(element) {
    return !element.paused && !element.ended;
  }

  /** The playing media element (the last one started, if several play), else the most recently
   * played one; nothing when no media element of the page has played yet. */
  function currentMedia() {
    if (lastPlayed && lastPlayed.isConnected && isPlaying(lastPlayed)) return lastPlayed;
    const playing = Array.from(document.querySelectorAll("video, audio")).find((element) => isMedia(element) && isPlaying(element));
    if (playing) return playing;
    return lastPlayed && lastPlayed.isConnected ? lastPlayed : null;
  }

  function mediaState() {
    const element = currentMedia();
    if (!element || !Number.isFinite(element.currentTime)) return null;
    const state = { time: element.currentTime, playing: isPlaying(element), rate: element.playbackRate };
    if (Number.isFinite(element.duration)) state.duration = element.duration;
    return state;
  }

  api.runtime.onMessage.addListener((message, sender, sendResponse) => {
    if (message && message.kind === "state?") {
      sendResponse({ scrollX: Math.round(window.scrollX), scrollY: Math.round(window.scrollY), media: mediaState() });
    } else if (message && message.kind === "pause") {
      const element = currentMedia();
      if (element && isPlaying(element)) element.pause();
    }
    return false;
  });

  // Settled scroll positions only: one report a second at most.
  window.addEventListener("scroll", () => {
    if (scrollTimer) return;
    scrollTimer = setTimeout(() => {
      scrollTimer = null;
      api.runtime.sendMessage({ kind: "scrolled" }).catch(() => {});
    }, 1000);
  }, { passive: true });

  // Media events do not bubble: listened for on the document while they descend (capture), so
  // elements the page adds later count too. A burst (dragging the position) is one report.
  const mediaEvents = ["play", "playing", "pause", "seeked", "ratechange", "ended", "waiting", "durationchange"];
  for (const type of mediaEvents) {
    document.addEventListener(type, (event) => {
      if (!isMedia(event.target)) return;
      if (type === "play" || type === "playing") lastPlayed = event.target;
      else if (!lastPlayed && type !== "durationchange") return; // nothing has played here yet
      if (mediaTimer) clearTimeout(mediaTimer);
      mediaTimer = setTimeout(() => {
        mediaTimer = null;
        api.runtime.sendMessage({ kind: "media" }).catch(() => {});
      }, 250);
    }, true);
  }

  /** Puts the page's media where the other machine's was: the first media element (not a muted
   * loop) once it has its metadata (it may come later than this script), at the target plus the
   * time the page took to load while the media played there; then plays or pauses as it did there
   * (a browser may refuse to start sound without a click: the media then waits, paused, at the time). */
  function restoreMedia(media) {
    if (!media || typeof media.time !== "number" || !Number.isFinite(media.time) || media.time < 0) return;
    const openedAt = typeof media.openedAt === "number" ? media.openedAt : Date.now();
    const rate = typeof media.rate === "number" && Number.isFinite(media.rate) && media.rate >= 0 ? media.rate : 1;
    const apply = (element) => {
      let target = media.time + (media.playing ? Math.max(0, Date.now() - openedAt) / 1000 * rate : 0);
      if (Number.isFinite(element.duration)) target = Math.min(target, element.duration);
      element.currentTime = target;
      if (media.playing) element.play().catch(() => {});
      else element.pause();
    };
    const whenReady = (element) => {
      if (element.readyState >= HTMLMediaElement.HAVE_METADATA) apply(element);
      else element.addEventListener("loadedmetadata", () => apply(element), { once: true });
    };
    const first = () => Array.from(document.querySelectorAll("video, audio")).find(isMedia);
    const element = first();
    if (element) return whenReady(element);
    // No media element yet (pages that build their player late): watch for one, for a minute at most.
    const observer = new MutationObserver(() => {
      const added = first();
      if (!added) return;
      observer.disconnect();
      whenReady(added);
    });
    observer.observe(document.documentElement, { childList: true, subtree: true });
    setTimeout(() => observer.disconnect(), 60 * 1000);
  }

  api.runtime.sendMessage({ kind: "loaded" }).then((restore) => {
    if (!restore) return;
    if (typeof restore.scrollY === "number") window.scrollTo(restore.scrollX || 0, restore.scrollY);
    restoreMedia(restore.media);
  }).catch(() => {});
})();

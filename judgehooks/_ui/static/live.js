// The live pages (overview, first page of records): while the page is visible, look every
// data-live-every ms for a new record (GET data-live: the newest record's marker); when there is one,
// fetch this page again and swap in its [data-live-region] (the tables and charts, never the form
// being typed in). A hidden page does not look; it looks at once when shown again.
"use strict";
(function () {
  var main = document.querySelector("main[data-live]");
  if (!main) return;
  var url = main.getAttribute("data-live");
  var marker = main.getAttribute("data-live-marker") || "";
  var every = parseInt(main.getAttribute("data-live-every"), 10);
  var status = main.querySelector("[data-live-status]");
  var timer = null;
  var busy = false;
  if (!(every > 0)) return;

  function say(text) {
    if (status) status.textContent = text;
  }

  function later(ms) {
    clearTimeout(timer);
    timer = null;
    if (document.visibilityState === "visible") timer = setTimeout(look, ms);
  }

  function swap(latest) {
    return fetch(window.location.href, {credentials: "same-origin", cache: "no-store"})
      .then(function (reply) {
        if (!reply.ok) throw new Error("the page answered " + reply.status);
        return reply.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("[data-live-region]");
        var here = document.querySelector("[data-live-region]");
        if (!fresh || !here) throw new Error("the page has no live region");
        here.replaceWith(document.importNode(fresh, true));
        marker = latest;
        say("Live: updated at " + new Date().toLocaleTimeString() + ".");
      });
  }

  function look() {
    if (busy || document.visibilityState !== "visible") return;
    busy = true;
    fetch(url, {credentials: "same-origin", cache: "no-store", headers: {"Accept": "application/json"}})
      .then(function (reply) {
        if (!reply.ok) throw new Error("the store answered " + reply.status);
        return reply.json();
      })
      .then(function (body) {
        if (body && typeof body.latest === "string" && body.latest !== marker) return swap(body.latest);
      })
      .catch(function (error) {
        say("Live: could not look for new records (" + error.message + "); trying again.");
      })
      .then(function () {
        busy = false;
        later(every);
      });
  }

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") later(0);
    else later(every);  // hidden: clears the timer, sets none
  });
  later(every);
})();

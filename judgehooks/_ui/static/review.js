// The review page's keys: each button's data-key (the page writes the keys `judgehooks review` takes:
// p pass, f fail, n skip), not while typing a note.
"use strict";
document.addEventListener("keydown", function (event) {
  if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
  var target = event.target;
  if (target && (target.tagName === "TEXTAREA" || target.tagName === "INPUT" || target.isContentEditable)) return;
  var key = event.key.toLowerCase();
  if (!/^[a-z]$/.test(key)) return;
  var button = document.querySelector('form.label button[data-key="' + key + '"]');
  if (button) {
    event.preventDefault();
    button.click();
  }
});

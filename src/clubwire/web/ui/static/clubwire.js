// clubwire settings area: the copy button of a secret shown once (without JavaScript the
// button stays hidden and the secret is plain, selectable text), the secret taken off a page
// the browser keeps for Back, and a guard for forms htmx posts in the background. No inline
// script anywhere (CSP).
(function () {
  "use strict";

  function reveal(root) {
    root.querySelectorAll("button[data-copy]").forEach(function (button) {
      button.hidden = false;
    });
  }

  function say(id, text) {
    var status = document.querySelector('[data-copy-status="' + id + '"]');
    if (status) {
      status.textContent = text;
    }
  }

  function selectText(element) {
    var range = document.createRange();
    range.selectNodeContents(element);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  function copy(button) {
    var id = button.getAttribute("data-copy");
    var source = document.getElementById(id);
    if (!source) {
      return;
    }
    var text = source.textContent;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () { say(id, "Copied."); },
        function () { selectText(source); say(id, "Selected: press Ctrl+C (or ⌘C) to copy."); }
      );
    } else {
      selectText(source);
      say(id, "Selected: press Ctrl+C (or ⌘C) to copy.");
    }
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button[data-copy]") : null;
    if (button) {
      copy(button);
    }
  });
  // A form htmx posted in the background was answered by the sign-in page (the session
  // ended): go there, rather than swap a part of the page for nothing.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var url = event.detail.xhr.responseURL ? new URL(event.detail.xhr.responseURL) : null;
    if (url && url.origin === window.location.origin && url.pathname === "/sign-in") {
      event.detail.shouldSwap = false;
      window.location.assign(url.href);
    }
  });
  // Keep keyboard focus on the button that was pressed when htmx refreshes its part of the
  // page (buttons that htmx refreshes carry a stable id).
  var focusedId = null;
  document.addEventListener("htmx:beforeRequest", function () {
    var active = document.activeElement;
    focusedId = active && active.id ? active.id : null;
  });
  document.addEventListener("htmx:afterSettle", function () {
    var again = focusedId ? document.getElementById(focusedId) : null;
    if (again && document.activeElement !== again) {
      again.focus();
    }
    focusedId = null;
  });
  // A secret is shown once: a page the browser keeps to go Back to (its back/forward cache)
  // keeps it without the secret.
  window.addEventListener("pagehide", function () {
    document.querySelectorAll("section.secret").forEach(function (panel) { panel.remove(); });
  });
  document.addEventListener("DOMContentLoaded", function () { reveal(document); });
  // htmx swaps new content in (hx-boost): reveal its copy buttons too.
  document.addEventListener("htmx:load", function (event) { reveal(event.target); });
})();

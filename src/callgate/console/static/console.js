// callgate console: the approvals inbox's live rows. Vanilla JavaScript, no
// dependencies. Every few seconds the pending rows are asked for again; the
// server answers 204 while nothing changed. New rows land below the shown
// ones (oldest first), so nothing the reader looks at moves.
(function () {
  "use strict";
  var body = document.getElementById("pending");
  if (!body || !body.dataset.poll) return;
  var status = document.getElementById("inbox-status");
  var count = document.getElementById("pending-count");
  var every = 2000;

  function known() {
    var ids = {};
    body.querySelectorAll("tr[data-id]").forEach(function (row) { ids[row.dataset.id] = true; });
    return ids;
  }

  function poll() {
    var url = body.dataset.poll + "?version=" + encodeURIComponent(body.dataset.version || "");
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (response.status === 204) return null;
        if (!response.ok) throw new Error("status " + response.status);
        var version = response.headers.get("X-Inbox-Version");
        var total = response.headers.get("X-Inbox-Count");
        return response.text().then(function (html) { return [html, version, total]; });
      })
      .then(function (answer) {
        if (answer === null) return;
        var before = known();
        body.innerHTML = answer[0];
        body.dataset.version = answer[1] || "";
        if (count && answer[2] !== null) count.textContent = answer[2];
        var fresh = 0;
        body.querySelectorAll("tr[data-id]").forEach(function (row) {
          if (!before[row.dataset.id]) { row.classList.add("fresh"); fresh += 1; }
        });
        if (status && fresh) {
          status.textContent = fresh === 1 ? "1 new request arrived." : fresh + " new requests arrived.";
        }
      })
      .catch(function () {
        if (status) status.textContent = "Could not reach the server; retrying.";
      })
      .finally(function () { window.setTimeout(poll, every); });
  }

  window.setTimeout(poll, every);
})();

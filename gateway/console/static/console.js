// The console's only script: it refreshes the pending approvals every
// second so a new one appears without a reload. Notes being typed are kept.
"use strict";
(function () {
  const box = document.getElementById("pending");
  if (!box || !box.dataset.poll) return;
  const ids = () => { const d = box.querySelector("[data-ids]"); return d ? d.dataset.ids : ""; };
  async function poll() {
    try {
      const res = await fetch(box.dataset.poll + location.search, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (res.redirected || res.status === 401) { location.reload(); return; }
      if (!res.ok) return;
      const html = await res.text();
      const tpl = document.createElement("template");
      tpl.innerHTML = html;
      const fresh = tpl.content.querySelector("[data-ids]");
      if (!fresh || fresh.dataset.ids === ids()) return;
      const notes = {};
      box.querySelectorAll("textarea").forEach((t) => { notes[t.id] = t.value; });
      const focused = document.activeElement && document.activeElement.id;
      box.replaceChildren(tpl.content);
      box.querySelectorAll("textarea").forEach((t) => { if (notes[t.id]) t.value = notes[t.id]; });
      if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
    } catch (e) { /* the next poll tries again */ }
  }
  setInterval(poll, 1000);
})();

// A deny needs a note (the agent is told it as the reason): the Deny
// button makes its form's note required before the browser submits, the
// Approve button does not. The server refuses a deny without one too.
(function () {
  document.addEventListener("click", (e) => {
    const b = e.target.closest && e.target.closest("button[name=action]");
    if (!b || !b.form) return;
    const note = b.dataset.needsNote ? document.getElementById(b.dataset.needsNote) : b.form.querySelector("textarea[name=note]");
    if (note) note.required = Boolean(b.dataset.needsNote);
  });
})();

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

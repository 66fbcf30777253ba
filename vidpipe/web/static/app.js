// vidpipe status page: a page of camera tiles (snapshots), refreshed from /api/cameras once a
// second; a tile opens the camera's MJPEG live stream in a panel.
// No framework, no CDN: this file ships in the Python package.
"use strict";

const REFRESH_MS = 1000;
// A page of tiles at a time: with hundreds of cameras only one page is in the document.
const PAGE_SIZE = 24;
// Tiles show still snapshots, refreshed this often while on screen; the MJPEG stream of a
// camera is opened only in the live panel (an open stream per tile does not scale).
const SNAPSHOT_MS = 3000;
// State filter: the capture states each choice covers.
const STATE_GROUPS = {
  streaming: ["streaming"],
  paused: ["paused"],
  down: ["backoff", "connecting", "stalled", "starting"],
  stopped: ["stopped"],
};

let cameras = []; // the latest /api/cameras records, in config order
const tiles = new Map(); // camera name -> tile element, of the page shown only
let recentEventCameras = new Set(); // cameras with events in the last RECENT_EVENTS_S

function fmt(value, digits, unit) {
  if (value === null || value === undefined) return "–";
  return value.toFixed(digits) + (unit || "");
}

function describeDetections(cam) {
  const dets = cam.last_detections || [];
  if (!dets.length) return "no detections yet";
  const counts = new Map();
  for (const d of dets) counts.set(d.label, (counts.get(d.label) || 0) + 1);
  const parts = [...counts].map(([label, n]) => (n > 1 ? n + " × " : "") + label);
  let when = "";
  if (cam.last_detection_time) {
    const ago = Math.max(0, Date.now() / 1000 - cam.last_detection_time);
    when = " (" + (ago < 60 ? ago.toFixed(0) + " s" : (ago / 60).toFixed(0) + " min") + " ago)";
  }
  return "last: " + parts.join(", ") + when;
}

// -- the view: filters and page, kept in the URL hash (#page=2&state=down&q=gate&events=1) --

function readView() {
  const h = new URLSearchParams(location.hash.slice(1));
  const state = h.get("state") || "";
  return {
    page: Math.max(1, parseInt(h.get("page") || "1", 10) || 1),
    state: STATE_GROUPS[state] ? state : "",
    q: h.get("q") || "",
    events: h.get("events") === "1",
  };
}

function writeView(view) {
  const h = new URLSearchParams();
  if (view.page > 1) h.set("page", String(view.page));
  if (view.state) h.set("state", view.state);
  if (view.q) h.set("q", view.q);
  if (view.events) h.set("events", "1");
  const hash = h.toString();
  if (hash !== location.hash.slice(1)) location.hash = hash; // hashchange renders
  else render();
}

function matches(cam, view) {
  if (view.state && !STATE_GROUPS[view.state].includes(cam.state)) return false;
  if (view.events && !recentEventCameras.has(cam.name)) return false;
  return !view.q || cam.name.toLowerCase().includes(view.q.toLowerCase());
}

function syncFilterForm(view) {
  const form = document.getElementById("camera-filter");
  if (form.state.value !== view.state) form.state.value = view.state;
  form.events.checked = view.events;
  if (document.activeElement !== form.q && form.q.value !== view.q) form.q.value = view.q;
  for (const opt of form.state.options) { // how many cameras each choice holds
    const n = opt.value ? cameras.filter((c) => STATE_GROUPS[opt.value].includes(c.state)).length
      : cameras.length;
    opt.textContent = opt.textContent.replace(/ \(\d+\)$/, "") + " (" + n + ")";
  }
}

// -- tiles -------------------------------------------------------------------------------

// Only tiles on screen refresh their snapshot (and a tile waits for its last one to load).
const onScreen = new IntersectionObserver((entries) => {
  for (const e of entries) {
    e.target.dataset.visible = e.isIntersecting ? "1" : "";
    if (e.isIntersecting) loadSnapshot(e.target, false);
  }
});

function loadSnapshot(tile, again) {
  const img = tile.querySelector("img.stream");
  if (img.dataset.loading) return;
  const due = Number(img.dataset.loadedAt || 0) + SNAPSHOT_MS;
  if (!again && Date.now() < due) return;
  img.dataset.loading = "1";
  img.src = tile.dataset.snapshotUrl + "?t=" + Date.now();
}

function refreshSnapshots() {
  for (const tile of tiles.values()) {
    if (tile.dataset.visible) loadSnapshot(tile, false);
  }
}

function createTile(cam) {
  const tpl = document.getElementById("tile-template");
  const tile = tpl.content.firstElementChild.cloneNode(true);
  tile.dataset.camera = cam.name;
  tile.dataset.snapshotUrl = cam.snapshot_url;
  tile.querySelector(".name").textContent = cam.name;
  const img = tile.querySelector("img.stream");
  img.alt = "snapshot of " + cam.name;
  const done = () => { img.dataset.loading = ""; img.dataset.loadedAt = String(Date.now()); };
  img.addEventListener("load", () => { done(); img.classList.remove("missing"); });
  img.addEventListener("error", () => { done(); img.classList.add("missing"); }); // no frame yet
  tile.querySelector(".view").addEventListener("click", () => openLive(cam.name));
  onScreen.observe(tile);
  return tile;
}

function dropTile(name, tile) {
  onScreen.unobserve(tile);
  tile.querySelector("img.stream").removeAttribute("src");
  tile.remove();
  tiles.delete(name);
}

function updateTile(tile, cam) {
  const state = tile.querySelector(".state");
  // a camera with a record input (inputs:) says when that input is not streaming
  const record = (cam.inputs || []).find((i) => i.role === "record");
  state.textContent = cam.state +
    (record && record.state !== "streaming" ? " · record " + record.state : "");
  state.title = record ? "record input: " + record.state +
    (record.last_error ? " (" + record.last_error + ")" : "") : "";
  state.className = "state " + cam.state;
  tile.dataset.state = cam.state;
  tile.classList.toggle("down", cam.state === "backoff" || cam.state === "stopped");
  tile.classList.toggle("warn", cam.state === "stalled" || cam.state === "connecting");
  // paused through the API or the config: nothing wrong, nothing running; not "down"
  tile.classList.toggle("paused", cam.state === "paused");
  tile.classList.toggle("recent-events", recentEventCameras.has(cam.name));
  tile.querySelector(".fps-in").textContent = fmt(cam.fps_in, 1);
  tile.querySelector(".fps-out").textContent = fmt(cam.fps_out, 1);
  tile.querySelector(".p95").textContent = fmt(cam.latency_p95_ms, 0, " ms");
  tile.querySelector(".drops").textContent = String(cam.drops);
  tile.querySelector(".motion").textContent =
    cam.motion_ratio == null ? "off" : fmt(100 * cam.motion_ratio, 0, " %");
  tile.querySelector(".detections").textContent = describeDetections(cam);
}

// Show the page of the view: only its tiles are in the document, in config order.
function render() {
  const view = readView();
  syncFilterForm(view);
  const shown = cameras.filter((c) => matches(c, view));
  const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
  const page = Math.min(view.page, pages);
  const onPage = shown.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE);
  const wanted = new Set(onPage.map((c) => c.name));
  for (const [name, tile] of tiles) if (!wanted.has(name)) dropTile(name, tile);
  const nodes = onPage.map((cam) => {
    let tile = tiles.get(cam.name);
    if (!tile) { tile = createTile(cam); tiles.set(cam.name, tile); }
    updateTile(tile, cam);
    return tile;
  });
  keepChildren(document.getElementById("tiles"), nodes);
  const main = document.getElementById("tiles");
  main.dataset.page = String(page);
  main.dataset.pages = String(pages);
  document.getElementById("page-info").textContent = shown.length
    ? "page " + page + " of " + pages + " · " + shown.length + " of " + cameras.length + " camera(s)"
    : "no camera matches";
  document.getElementById("page-prev").disabled = page <= 1;
  document.getElementById("page-next").disabled = page >= pages;
}

function goToPage(delta) {
  const view = readView();
  const pages = Number(document.getElementById("tiles").dataset.pages || 1);
  view.page = Math.min(Math.max(1, Math.min(view.page, pages) + delta), pages);
  writeView(view);
}

const filterForm = document.getElementById("camera-filter");
function filterChanged() {
  writeView({ page: 1, state: filterForm.state.value, q: filterForm.q.value.trim(),
              events: filterForm.events.checked });
}
filterForm.addEventListener("input", filterChanged);
filterForm.addEventListener("change", filterChanged);
filterForm.addEventListener("submit", (e) => e.preventDefault());
document.getElementById("page-prev").addEventListener("click", () => goToPage(-1));
document.getElementById("page-next").addEventListener("click", () => goToPage(1));
window.addEventListener("hashchange", render);

// -- the live panel: the one MJPEG stream the page opens --------------------------------

function openLive(name) {
  const cam = cameras.find((c) => c.name === name);
  if (!cam) return;
  const dialog = document.getElementById("live");
  dialog.dataset.camera = name;
  dialog.querySelector(".name").textContent = name;
  const img = dialog.querySelector("img.live-stream");
  img.alt = "live view of " + name;
  img.src = cam.stream_url;
  if (!dialog.open) dialog.showModal();
}

function stopLive() {
  const dialog = document.getElementById("live");
  // clearing src ends the MJPEG request: the server stops drawing and encoding for it
  dialog.querySelector("img.live-stream").removeAttribute("src");
  dialog.dataset.camera = "";
}

(() => {
  const dialog = document.getElementById("live");
  const img = dialog.querySelector("img.live-stream");
  dialog.querySelector("button.close").addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", stopLive); // the button, Escape or a click outside
  dialog.addEventListener("click", (e) => { if (e.target === dialog) dialog.close(); });
  // An MJPEG stream ends when the server restarts or the connection drops: reconnect.
  img.addEventListener("error", () => {
    setTimeout(() => {
      const cam = cameras.find((c) => c.name === dialog.dataset.camera);
      if (dialog.open && cam) img.src = cam.stream_url + "?t=" + Date.now();
    }, 2000);
  });
})();

async function refresh() {
  const summary = document.getElementById("summary");
  try {
    const resp = await fetch("/api/cameras", { cache: "no-store" });
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    const data = await resp.json();
    cameras = data.cameras;
    render();
    const up = cameras.filter((c) => c.streaming).length;
    summary.textContent = up + " of " + cameras.length + " camera(s) streaming";
  } catch (err) {
    summary.textContent = "daemon unreachable (" + err.message + ")";
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}

// Which cameras had events lately (/api/v1/events; a 404: no event store, none have).
const RECENT_EVENTS_S = 600;
const RECENT_EVENTS_REFRESH_MS = 10000;

async function refreshRecentEvents() {
  let again = true;
  try {
    const after = (Date.now() / 1000 - RECENT_EVENTS_S).toFixed(0);
    const resp = await fetch("/api/v1/events?limit=1000&after=" + after, { cache: "no-store" });
    if (resp.status === 404) { again = false; return; }
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    const data = await resp.json();
    recentEventCameras = new Set(data.events.map((e) => e.camera));
    render();
  } catch (err) {
    // the summary already says when the daemon is unreachable
  } finally {
    if (again) setTimeout(refreshRecentEvents, RECENT_EVENTS_REFRESH_MS);
  }
}

// The overload banner: vidpipe_overloaded from /api/stats. Less often than the tiles, as
// the stats walk the whole registry.
const OVERLOAD_REFRESH_MS = 5000;

async function refreshOverload() {
  try {
    const resp = await fetch("/api/stats", { cache: "no-store" });
    if (resp.ok) {
      const data = await resp.json();
      document.getElementById("overload-banner").hidden = data.pipeline.overloaded !== 1;
    }
  } catch (err) {
    // the tiles' summary already says when the daemon is unreachable
  } finally {
    setTimeout(refreshOverload, OVERLOAD_REFRESH_MS);
  }
}

// Recent event clips (/api/clips). The list is updated in place, each figure keyed by its
// camera and clip id: a figure already shown, and its video, are kept as they are (a video
// that is playing goes on playing), only new clips are added and dropped ones removed.
const CLIPS_REFRESH_MS = 3000;
let clipsShown = "";

function clipFigure(clip) {
  const tpl = document.getElementById("clip-template");
  const fig = tpl.content.firstElementChild.cloneNode(true);
  fig.dataset.clip = clip.id;
  const video = fig.querySelector("video");
  video.src = clip.url;
  const crop = fig.querySelector("img.crop");
  if (clip.crop_url) {
    crop.src = clip.crop_url;
    crop.alt = "best shot of " + (clip.crops[0].label || "object");
  } else {
    crop.remove();
  }
  const when = new Date(clip.start).toLocaleTimeString(); // RFC 3339, as in every record
  const tracks = clip.tracker_ids.length ? " #" + clip.tracker_ids.join(", #") : "";
  fig.querySelector(".what").textContent =
    when + " · " + clip.duration_s.toFixed(1) + " s · " + (clip.classes.join(", ") || "–") + tracks;
  return fig;
}

// Make `parent`'s children the `wanted` nodes, in order, touching only what differs. New
// clips come first, so the figures already shown keep their place and are never moved
// (moving a playing video out of the page would pause it).
function keepChildren(parent, wanted) {
  const keep = new Set(wanted);
  for (const child of [...parent.children]) if (!keep.has(child)) child.remove();
  wanted.forEach((node, i) => {
    if (parent.children[i] !== node) parent.insertBefore(node, parent.children[i] || null);
  });
}

function clipCameraBlock(root, name) {
  const found = [...root.children].find((b) => b.dataset.camera === name);
  if (found) return found;
  const block = document.createElement("div");
  block.className = "clip-camera";
  block.dataset.camera = name;
  const h = document.createElement("h3");
  const row = document.createElement("div");
  row.className = "clip-row";
  block.append(h, row);
  return block;
}

async function refreshClips() {
  try {
    const resp = await fetch("/api/clips", { cache: "no-store" });
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    const data = await resp.json();
    const key = JSON.stringify(data.cameras.map((c) => [c.name, c.clips.map((k) => k.id)]));
    if (key !== clipsShown) {
      clipsShown = key;
      const root = document.getElementById("clip-cameras");
      const blocks = data.cameras.map((cam) => {
        const block = clipCameraBlock(root, cam.name);
        block.querySelector("h3").textContent =
          cam.name + (cam.clips.length ? "" : ": no clips yet");
        const row = block.querySelector(".clip-row");
        const shown = new Map([...row.children].map((fig) => [fig.dataset.clip, fig]));
        keepChildren(row, cam.clips.map((clip) => shown.get(clip.id) || clipFigure(clip)));
        return block;
      });
      keepChildren(root, blocks);
      document.getElementById("clips").hidden = data.cameras.length === 0;
    }
  } catch (err) {
    // the camera tiles already say when the daemon is unreachable
  } finally {
    setTimeout(refreshClips, CLIPS_REFRESH_MS);
  }
}

// The newest stored events (/api/v1/events), filtered by camera and kind; each with its
// crop and a link to its clip. A 404 means the daemon runs without an event store.
const EVENTS_REFRESH_MS = 3000;
const EVENTS_SHOWN = 20;
let eventsShown = "";
let eventsTimer = null;

function eventItem(e) {
  const li = document.createElement("li");
  li.className = "event " + e.kind;
  li.dataset.kind = e.kind;
  li.dataset.camera = e.camera;
  if (e.crop_url) {
    const img = document.createElement("img");
    img.className = "crop";
    img.src = e.crop_url;
    img.alt = "best shot of " + (e.label || "object");
    li.appendChild(img);
  }
  const where = e.zone || e.line || "";
  const track = e.tracker_id == null ? "" : " #" + e.tracker_id;
  const text = document.createElement("span");
  text.textContent = new Date(e.ts).toLocaleTimeString() + " · " + e.camera + " · " + e.kind +
    (where ? " " + where : "") + " · " + (e.label || "–") + track;
  li.appendChild(text);
  if (e.clip_url) {
    const a = document.createElement("a");
    a.href = e.clip_url;
    a.className = "clip-link";
    a.textContent = "clip";
    li.appendChild(a);
  } else if (e.clip_deleted) {
    li.appendChild(document.createTextNode(" (clip deleted)"));
  }
  return li;
}

function syncCameraOptions(select) {
  const have = new Set([...select.options].map((o) => o.value));
  for (const name of cameras.map((c) => c.name).sort()) {
    if (!have.has(name)) select.appendChild(new Option(name, name));
  }
}

async function refreshEvents() {
  const form = document.getElementById("event-filter");
  syncCameraOptions(form.camera);
  const params = new URLSearchParams({ limit: String(EVENTS_SHOWN) });
  if (form.camera.value) params.set("camera", form.camera.value);
  if (form.kind.value) params.set("kind", form.kind.value);
  let again = true;
  try {
    const resp = await fetch("/api/v1/events?" + params, { cache: "no-store" });
    if (resp.status === 404) { again = false; return; } // no event store in this daemon
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    const data = await resp.json();
    const key = params + JSON.stringify(data.events.map((e) => [e.id, e.clip_url]));
    if (key !== eventsShown) {
      eventsShown = key;
      const list = document.getElementById("event-list");
      list.replaceChildren(...data.events.map(eventItem));
      list.dataset.filter = params.toString();
    }
    document.getElementById("events").hidden = false;
  } catch (err) {
    // the camera tiles already say when the daemon is unreachable
  } finally {
    if (again) eventsTimer = setTimeout(refreshEvents, EVENTS_REFRESH_MS);
  }
}

document.getElementById("event-filter").addEventListener("change", () => {
  clearTimeout(eventsTimer); // the new filter now, not at the next tick
  eventsShown = "";
  refreshEvents();
});

refresh();
setInterval(refreshSnapshots, SNAPSHOT_MS / 3);
refreshRecentEvents();
refreshOverload();
refreshClips();
refreshEvents();

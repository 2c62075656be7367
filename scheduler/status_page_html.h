// The status page itself: plain HTML, CSS and JavaScript, no framework and
// no build step. It reads only the JSON endpoints (docs/status_page.md) and
// redraws every two seconds.
#ifndef CORESCAPE_SCHEDULER_STATUS_PAGE_HTML_H_
#define CORESCAPE_SCHEDULER_STATUS_PAGE_HTML_H_

namespace corescape::scheduler {

inline constexpr char kStatusPageHtml[] = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>corescape scheduler</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; } td, th { padding: 2px 10px; text-align: left; }
th { border-bottom: 1px solid #999; } .muted { color: #777; }
.state-ALIVE, .state-RUNNING, .state-SUCCEEDED { color: #17702a; }
.state-DEAD, .state-FAILED { color: #b00020; } .state-DRAINING, .state-RECOVERING { color: #a06000; }
.bar { display: inline-block; width: 220px; height: 12px; background: #eee; vertical-align: middle; }
.bar > span { display: block; height: 100%; background: #3a7bd5; }
.job { border: 1px solid #ddd; padding: 8px 12px; margin: 8px 0; }
svg.loss { background: #fafafa; border: 1px solid #eee; }
#error { color: #b00020; }
</style>
</head>
<body>
<h1>corescape scheduler <span id="scheduler" class="muted"></span></h1>
<div id="error"></div>
<div id="summary"></div>
<h2>Nodes</h2>
<table id="nodes"><thead><tr><th>name</th><th>role</th><th>state</th><th>job</th>
<th>last heartbeat</th><th>host</th></tr></thead><tbody></tbody></table>
<h2>Jobs</h2>
<div id="jobs"></div>
<h2>Recent events</h2>
<table id="events"><tbody></tbody></table>
<script>
"use strict";
const REFRESH_MS = 2000;
const curves = {};  // job id -> {after, train: [[step, loss]], val: [[step, loss]]}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}
function svg(tag, attrs) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}
async function get(path) {
  const response = await fetch(path, {cache: "no-store"});
  const body = await response.json();
  if (!response.ok) throw new Error(path + ": " + (body.message || response.status));
  return body;
}
function ago(unixMs) {
  const ms = Number(unixMs);
  if (!ms) return "never";
  return ((Date.now() - ms) / 1000).toFixed(1) + " s ago";
}
function bar(fraction, title) {
  const f = Math.max(0, Math.min(1, fraction || 0));
  return el("span", {class: "bar", title: title},
            el("span", {style: "width:" + (100 * f).toFixed(1) + "%"}));
}

function drawNodes(nodes) {
  const body = document.querySelector("#nodes tbody");
  body.replaceChildren(...nodes.map(n => el("tr", {"data-node": n.name, "data-state": n.state,
                                                 "data-job": n.current_job_id || ""},
      el("td", {}, n.name), el("td", {}, n.role),
      el("td", {class: "state-" + n.state}, n.state), el("td", {}, n.current_job_id || ""),
      el("td", {}, ago(n.last_heartbeat_unix_ms)), el("td", {}, n.host))));
}

// Progress events into the curve: a step at or below the last one (a
// resume from a checkpoint) replaces the points from that step on; a
// validation point is a step on the eval interval (or the last step).
function addProgress(curve, job, p) {
  const step = Number(p.step), total = Number(job.spec.steps);
  const interval = Number(job.spec.eval_interval_steps);
  const last = curve.train.length ? curve.train[curve.train.length - 1][0] : 0;
  if (step <= last) {
    curve.train = curve.train.filter(pt => pt[0] < step);
    curve.val = curve.val.filter(pt => pt[0] < step);
  }
  curve.train.push([step, Number(p.loss)]);
  const validated = interval > 0 && (step % interval === 0 || step === total);
  if (validated && typeof p.validation_loss === "number" && p.validation_loss > 0) {
    curve.val.push([step, p.validation_loss]);
  }
}
async function updateCurve(job) {
  const curve = curves[job.job_id] || (curves[job.job_id] = {after: "0", train: [], val: []});
  for (let page = 0; page < 20; ++page) {
    const r = await get("/api/job/events?id=" + encodeURIComponent(job.job_id) +
                        "&after=" + curve.after + "&limit=5000");
    for (const e of r.events) if (e.progress) addProgress(curve, job, e.progress);
    curve.after = r.next_after;
    if (!r.more) break;
  }
  return curve;
}
function drawCurve(job, curve) {
  const W = 480, H = 160, P = 30;
  const s = svg("svg", {class: "loss", width: W, height: H, "data-job": job.job_id,
                        "data-train-points": curve.train.length,
                        "data-val-points": curve.val.length});
  const all = curve.train.concat(curve.val).filter(pt => isFinite(pt[1]));
  if (all.length === 0) return s;
  // Up to the newest step (the bar above shows how far that is).
  const maxStep = Math.max(...all.map(pt => pt[0]), 1);
  let lo = Math.min(...all.map(pt => pt[1])), hi = Math.max(...all.map(pt => pt[1]));
  if (hi - lo < 1e-9) { hi += 0.5; lo -= 0.5; }
  const x = step => P + (W - 2 * P) * step / maxStep;
  const y = loss => H - P + (2 * P - H) * (loss - lo) / (hi - lo);
  s.append(svg("polyline", {class: "train", fill: "none", stroke: "#3a7bd5",
      points: curve.train.filter(pt => isFinite(pt[1]))
                         .map(pt => x(pt[0]).toFixed(1) + "," + y(pt[1]).toFixed(1)).join(" ")}));
  for (const pt of curve.val) {
    if (isFinite(pt[1])) s.append(svg("circle", {class: "val", cx: x(pt[0]), cy: y(pt[1]),
                                                 r: 3, fill: "#d5583a"}));
  }
  for (const [text, yy] of [[hi.toFixed(3), P], [lo.toFixed(3), H - P]]) {
    const t = svg("text", {x: 2, y: yy, "font-size": 10}); t.textContent = text; s.append(t);
  }
  const t = svg("text", {x: W - P, y: H - 4, "font-size": 10, "text-anchor": "end"});
  t.textContent = "steps 0-" + maxStep + "  (line: training, dots: validation)";
  s.append(t);
  return s;
}
function drawPlan(plan) {
  const loads = plan.server_cost.map((c, i) => c / (plan.server_speed_weights[i] || 1));
  const max = Math.max(...loads, 1e-30);
  const box = el("div", {class: "plan", "data-job": plan.job_id,
                         "data-imbalance": plan.imbalance, "data-servers": loads.length},
      el("div", {}, "attention plan of step " + plan.step + ": imbalance " +
                    Number(plan.imbalance).toFixed(3) + " (tolerance " + plan.tolerance + ")"));
  loads.forEach((load, i) => box.append(el("div", {"data-server": plan.server_names[i]},
      bar(load / max, load.toExponential(3)), " " + plan.server_names[i] +
      " (" + plan.server_tasks[i] + " tasks)")));
  return box;
}

async function drawJobs(jobs) {
  const boxes = [];
  for (const job of jobs) {
    const p = job.progress, total = Number(job.spec.steps) || 1;
    const box = el("div", {class: "job", "data-job": job.job_id, "data-state": job.state,
                           "data-step": p.step},
        el("div", {}, el("b", {}, job.job_id), " " + (job.spec.name || "") + " ",
           el("span", {class: "state-" + job.state}, job.state), " ",
           el("span", {class: "muted"}, job.state_reason || "")),
        el("div", {}, bar(Number(p.step) / total, p.step + "/" + total),
           " step " + p.step + " of " + total + ", loss " + Number(p.loss).toFixed(4) +
           (p.validation_loss > 0 ? ", validation " + Number(p.validation_loss).toFixed(4) : "") +
           ", " + Math.round(p.tokens_per_second) + " tokens/s" +
           (p.mfu > 0 ? ", MFU " + (100 * p.mfu).toFixed(1) + "%" : "")));
    box.append(drawCurve(job, await updateCurve(job)));
    if (job.spec.attention && job.spec.attention.mode === "DISAGGREGATED") {
      try {
        box.append(drawPlan((await get("/api/attention_plan?id=" +
                                       encodeURIComponent(job.job_id))).plan));
      } catch (e) {
        box.append(el("div", {class: "muted"}, "no attention plan yet"));
      }
    }
    boxes.push(box);
  }
  document.getElementById("jobs").replaceChildren(...boxes);
}

async function refresh() {
  try {
    const [status, nodes, jobs] = await Promise.all(
        [get("/api/status"), get("/api/nodes"), get("/api/jobs?limit=20")]);
    document.getElementById("scheduler").textContent =
        status.scheduler_id + " " + status.version;
    document.getElementById("summary").textContent =
        status.workers_alive + " workers and " + status.attention_servers_alive +
        " attention servers alive, " + status.nodes_draining + " draining, " +
        status.nodes_dead + " dead; jobs: " + status.jobs_running + " running, " +
        status.jobs_pending + " pending";
    drawNodes(nodes.nodes);
    await drawJobs(jobs.jobs);
    document.querySelector("#events tbody").replaceChildren(...status.recent_events.map(e =>
        el("tr", {}, el("td", {class: "muted"}, new Date(Number(e.unix_ms)).toISOString()),
           el("td", {}, e.kind), el("td", {}, e.node_name || e.job_id || ""),
           el("td", {}, e.message || ""))));
    document.getElementById("error").textContent = "";
    document.body.setAttribute("data-refreshed", Date.now());
  } catch (e) {
    document.getElementById("error").textContent = "refresh failed: " + e.message;
  }
  setTimeout(refresh, REFRESH_MS);
}
refresh();
</script>
</body>
</html>
)HTML";

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_STATUS_PAGE_HTML_H_

// Drives the weir console in headless Chromium (Playwright with Debian's
// chromium) against a running 'weir run' or 'weir controller'. Run by
// cmd/weir's console tests, which pass:
//   WEIR_MODE       run (a healthy pipeline; the controls, then Stop),
//                   failing (a partition keeps failing on a poison row), or
//                   distributed (weir controller with workers)
//   WEIR_URL        the admin API's address (http://127.0.0.1:PORT)
//   WEIR_TOKEN      the admin (or cluster) token
//   WEIR_EXPECT     JSON {"nodes": [...], "edges": ["from->to", ...],
//                   "failing": "Check", "poison": "...", "queue": "events"}
//   WEIR_ARTIFACTS  a directory for the screenshots
//   CHROMIUM        the browser (default /usr/bin/chromium)
// It prints "step: ..." lines and exits non-zero with a message on the
// first check that fails. In mode run and distributed the test stops the
// process when the script prints "waiting for the process to end", and the
// script then checks that the page says it is disconnected.
const { chromium } = require("playwright-core");
const path = require("path");

const mode = process.env.WEIR_MODE || "run";
const url = process.env.WEIR_URL;
const token = process.env.WEIR_TOKEN;
const expect = JSON.parse(process.env.WEIR_EXPECT || "{}");
const artifacts = process.env.WEIR_ARTIFACTS;

function fail(msg) {
  throw new Error(msg);
}

async function waitFor(what, fn, ms = 15000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last === true) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  fail(`${what}: not reached in ${ms}ms (last: ${JSON.stringify(last)})`);
}

const step = (s) => console.log("step: " + s);

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  try {
    if (mode === "run") {
      step("without the token the page asks for it; typed into its field, the data comes");
      const bare = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      await bare.goto(url + "/");
      await bare.waitForFunction(() => document.querySelector('[data-test="message"]').textContent.includes("admin token"), null, { timeout: 15000 });
      if (await bare.$("body[data-loaded=true]")) fail("data shown without the token");
      await bare.fill('[data-test="token"]', token);
      await bare.dispatchEvent('[data-test="token"]', "change");
      await bare.waitForSelector("body[data-loaded=true]", { timeout: 15000 });
      await bare.close();
    }
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    // Nothing the page reads may fail while the process runs (a failed
    // fetch once it is gone is expected; refused actions are checked
    // below).
    let gone = false;
    page.on("response", (r) => !gone && r.request().method() === "GET" && r.status() >= 400 && errors.push(`${r.status()} ${r.url()}`));
    await page.goto(url + "/#token=" + token);
    await page.waitForSelector("body[data-loaded=true]", { timeout: 15000 });
    if ((await page.evaluate(() => location.hash)) !== "") fail("the token stayed in the address bar");
    const shot = (name) => page.screenshot({ path: path.join(artifacts, name), fullPage: true });
    const auth = { Authorization: "Bearer " + token };

    // /status as the page's origin serves it (under weir controller, its
    // pipeline member).
    const rawStatus = () => page.evaluate(async (h) => (await fetch("/status", { headers: h })).json(), auth);
    const status = async () => (mode === "distributed" ? (await rawStatus()).pipeline : rawStatus());
    const text = (sel) => page.textContent(sel);
    const stateText = () => text('[data-test="state"]');
    const tab = async (name) => {
      await page.click(`[data-tab="${name}"]`);
      await page.waitForSelector(`[data-panel="${name}"]:not([hidden])`);
    };
    const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

    await waitFor("state working", async () => (await stateText()) === "working" || (await stateText()));
    await waitFor("connection live", async () => (await text('[data-test="connection"]')) === "live");

    step("graph: every node and edge of the spec, every computation of /status");
    for (const id of expect.nodes || []) {
      if (!(await page.$(`[data-node="${id}"]`))) fail(`graph lacks node ${id}`);
    }
    for (const e of expect.edges || []) {
      if (!(await page.$(`[data-edge="${e}"]`))) fail(`graph lacks edge ${e}`);
    }
    const st0 = await status();
    for (const c of Object.keys(st0.computations)) {
      if (!(await page.$(`[data-node="${c}"][data-kind="computation"]`))) fail(`graph lacks computation ${c} of /status`);
    }
    // Measured once laid out: under load the first status refresh can
    // redraw the graph between the checks above and this one (a flake of
    // the fresh-clone CI run, stop 34). A graph whose text stays under
    // 12px fails here, naming its height.
    await waitFor("graph text readable (at least 12px high)", async () =>
      (await page.$eval('[data-kind="computation"] .name', (t) => t.getBoundingClientRect().height)) >= 12 ||
      `${await page.$eval('[data-kind="computation"] .name', (t) => t.getBoundingClientRect().height)}px`);
    const clash = await page.evaluate(() => {
      const rects = [...document.querySelectorAll('[data-test="graph"] [data-node] rect')].map((r) => [r.closest("[data-node]").dataset.node, r.getBoundingClientRect()]);
      for (const t of document.querySelectorAll('[data-test="graph"] .edge text')) {
        const b = t.getBoundingClientRect();
        for (const [id, r] of rects) {
          if (b.left < r.right && r.left < b.right && b.top < r.bottom && r.top < b.bottom) return `edge label "${t.textContent}" runs into node ${id}`;
        }
      }
      return null;
    });
    if (clash) fail(clash);

    if (mode === "large") {
      step("a large graph: every node readable at actual size, none overlapping, no page overflow");
      const boxes = await page.$$eval('[data-test="graph"] [data-node]', (ns) => ns.map((n) => {
        const r = n.querySelector("rect").getBoundingClientRect();
        return { id: n.dataset.node, x: r.x, y: r.y, w: r.width, h: r.height };
      }));
      for (let i = 0; i < boxes.length; i++) {
        for (let j = i + 1; j < boxes.length; j++) {
          const a = boxes[i], b = boxes[j];
          if (a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h) fail(`nodes ${a.id} and ${b.id} overlap`);
        }
      }
      const heights = await page.$$eval('[data-test="graph"] .fig', (ts) => ts.map((t) => t.getBoundingClientRect().height));
      if (Math.min(...heights) < 12) fail(`graph figures ${Math.min(...heights)}px high`);
      if (await overflow()) fail("horizontal overflow at 1400px");
      await shot("console-large.png");
      const wide = await page.$eval('[data-test="graph"]', (g) => g.getBoundingClientRect().width);
      const boxW = await page.$eval('[data-test="graph-box"]', (b) => b.clientWidth);
      if (wide <= boxW) fail(`at actual size the graph (${wide}px) should be wider than its box (${boxW}px)`);
      await page.click('[data-test="zoom"]');
      await waitFor("zoomed out to fit", async () => (await page.$eval('[data-test="graph"]', (g) => g.getBoundingClientRect().width)) <= boxW || "wider");
      await shot("console-large-zoomed-out.png");
      await page.click('[data-test="zoom"]');
      await waitFor("actual size again", async () => (await page.$eval('[data-test="graph"]', (g) => g.getBoundingClientRect().width)) === wide || "not yet");
      await page.setViewportSize({ width: 420, height: 900 });
      await page.waitForTimeout(600);
      if (await overflow()) fail(`horizontal overflow at 420px: ${await overflow()}px`);
    } else if (mode === "failing") {
      step("a failure appears on the graph within a second of /status");
      let t0 = 0;
      await waitFor("/status lists a failing partition", async () => {
        const s = await status();
        if ((s.failing || []).length > 0) {
          t0 = Date.now();
          return true;
        }
        return "none yet";
      }, 30000);
      await waitFor("the graph marks it", async () => (await page.$(`[data-node="${expect.failing}"][data-failing]:not([data-failing="0"])`)) !== null, 1000);
      console.log(`failure on the graph ${Date.now() - t0} ms after /status listed it`);
      if (!(await page.$eval('[data-test="state"]', (e) => e.classList.contains("degraded")))) fail("the header does not mark the pipeline degraded");

      step("failures view (through the summary's link): the full error, the poison row, its origin, history, CLI actions");
      await page.click('[data-test="failures-summary"] button');
      await page.waitForSelector('[data-panel="failures"]:not([hidden])');
      const card = `[data-failure^="${expect.failing}"]`;
      await page.waitForSelector(card);
      // Each attempt names the message by its id, which holds the attempt's
      // epoch: compare the rest.
      const norm = (e) => e.replace(/message \S+/, "message M");
      const err = await text(`${card} [data-field="error"]`);
      const f = (await status()).failing[0];
      if (norm(err) !== norm(f.last_error)) fail(`the card's error ${JSON.stringify(err)} is not /status's ${JSON.stringify(f.last_error)}`);
      const poison = await text(`${card} [data-field="poison"]`);
      if (!poison.includes(expect.poison)) fail(`poison row ${poison}, want it to include ${expect.poison}`);
      const origin = await text(`${card} [data-field="origin"]`);
      if (!/source events, partition \d, offset \d+/.test(origin)) fail(`origin ${origin}`);
      const cli = await text(`${card} .cli`);
      if (!cli.includes("weir queue read") || !cli.includes("weir pipeline pause")) fail(`CLI actions: ${cli}`);
      await waitFor("restart history", async () => (await page.$(`${card} .history li`)) !== null || (await text(card)), 10000);
      await shot("console-failing-view.png");

      step("the last error is readable at 1400 px (partitions table)");
      await tab("partitions");
      await page.waitForSelector('tr.failing [data-field="last_error"]');
      const box = await page.$eval('tr.failing [data-field="last_error"]', (td) => {
        const r = td.getBoundingClientRect();
        return { right: r.right, sw: td.scrollWidth, cw: td.clientWidth, text: td.textContent };
      });
      const tableBox = await page.$eval('[data-test="partitions"]', (t) => t.parentElement.getBoundingClientRect().right);
      if (box.sw > box.cw + 1) fail(`the error cell is cut: ${JSON.stringify(box)}`);
      if (box.right > 1400 && box.right > tableBox) fail(`the error cell ends at ${box.right}px, beyond the 1400px page`);
      if (!box.text.includes(expect.poisonError)) fail(`the error cell reads ${box.text}`);
      await tab("overview");
      await waitFor("a chart of a few seconds", async () => (await page.evaluate(() => window.__weir.last.series.t.length)) >= 10 || "not yet", 20000);
      await shot("console-failing.png");
      if (await overflow()) fail("horizontal overflow at 1400px");
      await page.setViewportSize({ width: 420, height: 900 });
      await page.waitForTimeout(600);
      for (const t of ["overview", "failures", "partitions"]) {
        await tab(t);
        if (await overflow()) fail(`horizontal overflow at 420px on ${t}: ${await overflow()}px`);
      }
      await shot("console-failing-420.png");

      step("Skip this message (two presses) skips the poison row: the failure clears on the page and in /status");
      await page.setViewportSize({ width: 1400, height: 1000 });
      await tab("failures");
      await page.click(`[data-skip^="${expect.failing}"]`);
      await waitFor("armed", async () => (await text(`[data-skip^="${expect.failing}"]`)) === "Confirm skip" || (await text(`[data-skip^="${expect.failing}"]`)));
      await page.click(`[data-skip^="${expect.failing}"]`);
      await waitFor("the skip recorded", async () => (await text('[data-test="message"]')).includes("will be skipped") || (await text('[data-test="message"]')));
      await waitFor("/status has no failing partition", async () => ((await status()).failing || []).length === 0 || "still failing", 30000);
      await waitFor("the graph unmarks it", async () => (await page.getAttribute(`[data-node="${expect.failing}"]`, "data-failing")) === "0" || "still marked", 2000);
      await waitFor("the failures view is empty", async () => !(await page.isHidden('[data-test="no-failures"]')) || "cards shown");
      await shot("console-skipped.png");
    } else {
      step("numbers equal /status");
      await waitFor("computation counters equal /status", async () => {
        const s = await status();
        for (const [c, k] of Object.entries(s.computations)) {
          const shown = await page.getAttribute(`[data-comp="${c}"] [data-field="inputs"]`, "data-value");
          if (Number(shown) !== k.Inputs) return `${c}: page ${shown}, /status ${k.Inputs}`;
          const out = await page.getAttribute(`[data-comp="${c}"] [data-field="outputs"]`, "data-value");
          if (Number(out) !== k.Outputs) return `${c} outputs: page ${out}, /status ${k.Outputs}`;
        }
        return true;
      });
      await tab("partitions");
      await waitFor("partitions equal /status", async () => {
        const s = await status();
        const rows = await page.$$eval('[data-test="partitions"] [data-partition]', (rs) => rs.map((r) => r.dataset.partition));
        const want = s.partitions.map((p) => p.Partition);
        return JSON.stringify(rows.sort()) === JSON.stringify(want.sort()) || { rows, want };
      });
      const comp0 = Object.keys(st0.computations).sort()[0];
      await page.selectOption('[data-test="partition-filter"]', comp0);
      await waitFor("the filter shows one computation's partitions", async () => {
        const rows = await page.$$eval('[data-test="partitions"] [data-partition]', (rs) => rs.map((r) => r.dataset.partition));
        const want = (await status()).partitions.map((p) => p.Partition).filter((p) => p.split(/[/@]/)[0] === comp0);
        return JSON.stringify(rows.sort()) === JSON.stringify(want.sort()) || { rows, want };
      });
      await page.selectOption('[data-test="partition-filter"]', "");
      if (mode === "run") {
        const lagCells = await page.$$eval('[data-test="partitions"] [data-field="lag"]', (cs) => cs.map((c) => c.dataset.value));
        if (!lagCells.includes("0")) fail(`no source partition shows lag 0: ${lagCells}`);
      }

      step("epochs: recent epochs with sizes and durations");
      await tab("epochs");
      await waitFor("epochs listed", async () => (await page.$$('[data-test="epochs"] [data-epoch]')).length > 0 || "none");
      const dur = await page.$$eval('[data-test="epochs"] [data-field="duration"]', (cs) => cs.map((c) => Number(c.dataset.value)));
      if (!dur.some((x) => x > 0)) fail(`no epoch duration: ${dur}`);
      const sizes = await page.$$eval('[data-test="epochs"] [data-field="bytes"]', (cs) => cs.map((c) => Number(c.dataset.value)));
      if (!sizes.some((x) => x > 0)) fail(`no epoch size: ${sizes}`);

      step("watermarks table and chart");
      await tab("watermarks");
      await waitFor("watermark rows", async () => (await page.$$('[data-test="watermarks"] [data-stream]')).length > 0 || "none");
      await waitFor("watermark chart", async () => (await page.$('[data-test="wm-chart"] canvas')) !== null || "no chart");

      step("the rate window is a control");
      await tab("overview");
      await page.selectOption('[data-test="window"]', "1m");
      await waitFor("data over 1m", async () => (await page.evaluate(() => window.__weir.last.window_s)) === 60 || "not yet");
      await waitFor("chart has points", async () => (await page.evaluate(() => window.__weir.last.series.t.length)) >= 2);
      await waitFor("the chart's legend gives values", async () => {
        const l = await text('[data-test="chart-legend"]');
        return (/Counter \d[\d,.]*\/s/.test(l) && !l.includes("--")) || l;
      });

      step("a computation's details, opened with the keyboard");
      const comp = Object.keys(st0.computations).sort()[0];
      await page.focus(`[data-node="${comp}"]`);
      await page.keyboard.press("Enter");
      await page.waitForSelector(`[data-test="detail"]:not([hidden]) [data-detail="${comp}"]`);
      await page.keyboard.press("Enter"); // the node keeps the focus: Enter again closes
      await page.waitForSelector('[data-test="detail"][hidden]', { state: "attached" });
      await page.focus(`[data-node="${comp}"]`);
      await page.keyboard.press("Enter");
      await page.waitForSelector(`[data-test="detail"]:not([hidden]) [data-detail="${comp}"]`);
      await page.click('[data-test="close-detail"]');
      await page.waitForSelector('[data-test="detail"][hidden]', { state: "attached" });
      await page.click(`[data-comp="${comp}"] button`); // the computations table opens it too
      await page.waitForSelector(`[data-test="detail"]:not([hidden]) [data-detail="${comp}"]`);

      if (mode === "run") {
        step("without the token Pause is refused and nothing changes");
        await page.fill('[data-test="token"]', "");
        await page.dispatchEvent('[data-test="token"]', "change");
        await page.click('button[data-action="pause"]');
        await waitFor("refusal shown", async () => (await text('[data-test="message"]')).includes("admin token"));
        if ((await status()).state !== "working") fail("a click without the token changed the state");

        step("with it, Pause (by keyboard) pauses, the header follows, Start resumes");
        await page.fill('[data-test="token"]', token);
        await page.dispatchEvent('[data-test="token"]', "change");
        await page.focus('button[data-action="pause"]');
        await page.keyboard.press("Enter");
        await waitFor("page shows paused", async () => (await stateText()) === "paused" || (await stateText()));
        if ((await status()).state !== "paused") fail("/status does not say paused after the click");
        await waitFor("the message says it is done", async () => {
          const m = await text('[data-test="message"]');
          return (m.startsWith("paused") && !m.includes("current")) || m;
        });
        await shot("console-paused.png");
        await page.click('button[data-action="start"]');
        await waitFor("page shows working", async () => (await stateText()) === "working" || (await stateText()));
        await waitFor("the message follows", async () => (await text('[data-test="message"]')).startsWith("working") || (await text('[data-test="message"]')));
      } else {
        step("workers and their jobs equal /status; Drain works");
        await tab("workers");
        const raw = await rawStatus();
        await waitFor("workers equal /status", async () => {
          const rows = await page.$$eval("[data-worker]", (rs) => rs.map((r) => r.dataset.worker).sort());
          const want = (await rawStatus()).workers.map((w) => w.id).sort();
          return JSON.stringify(rows) === JSON.stringify(want) || { rows, want };
        });
        for (const w of raw.workers) {
          const jobs = await page.getAttribute(`[data-worker="${w.id}"] [data-field="jobs"]`, "data-value");
          if (Number(jobs) !== w.jobs && Math.abs(Number(jobs) - w.jobs) > 1) fail(`worker ${w.id}: page ${jobs} jobs, /status ${w.jobs}`);
        }
        await tab("overview");
        await page.waitForTimeout(4000); // events flow again meanwhile
        await shot("console-distributed.png");
        await tab("workers");
        const victim = raw.workers[raw.workers.length - 1].id;
        await page.click(`[data-drain="${victim}"]`);
        await waitFor("the worker drains", async () => {
          const w = (await rawStatus()).workers.find((x) => x.id === victim);
          return (w.draining && (await text(`[data-worker="${victim}"]`)).includes("draining")) || JSON.stringify(w);
        });
        await shot("console-distributed-workers.png");
        await tab("overview");
      }

      step("no horizontal overflow at 420 px, on every view; 2560 px");
      await page.setViewportSize({ width: 420, height: 900 });
      await page.waitForTimeout(700);
      for (const t of ["overview", "failures", "partitions", "epochs", "watermarks"].concat(mode === "distributed" ? ["workers"] : [])) {
        await tab(t);
        await page.waitForTimeout(100);
        const o = await overflow();
        if (o > 0) fail(`horizontal overflow at 420px on ${t}: ${o}px`);
      }
      await tab("overview");
      await shot("console-420.png");
      await page.setViewportSize({ width: 2560, height: 1200 });
      await page.waitForTimeout(700);
      if (await overflow()) fail("horizontal overflow at 2560px");
      await shot("console-2560.png");
      await page.setViewportSize({ width: 1400, height: 1000 });

      step("the process ends: the page says disconnected");
      if (mode === "run") {
        await page.click('button[data-action="stop"]');
      }
      gone = true;
      console.log("waiting for the process to end");
      await waitFor("disconnected shown", async () => (await page.getAttribute("body", "data-connection")) === "lost" || "still live", 60000);
      const banner = await text('[data-test="disconnected"]');
      if (!banner.includes("Disconnected") || !(await page.isVisible('[data-test="disconnected"]'))) fail(`banner: ${banner}`);
      if ((await text('[data-test="connection"]')) !== "disconnected") fail("the header does not say disconnected");
      await shot("console-disconnected.png");
    }
    if (errors.length) fail("page errors: " + errors.join("; "));
    console.log("console e2e: ok");
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.error("console e2e: FAILED: " + e.message);
  process.exit(1);
});

// Drives the weir console in headless Chromium (Playwright with Debian's
// chromium), against a running 'weir run'. Run by cmd/weir's
// TestConsoleInChromium, which passes:
//   WEIR_URL        the admin API's address (http://127.0.0.1:PORT)
//   WEIR_TOKEN      the admin token
//   WEIR_EXPECT     JSON {"nodes": [...], "edges": ["from->to", ...]}
//   WEIR_ARTIFACTS  a directory for the screenshot
//   CHROMIUM        the browser (default /usr/bin/chromium)
// It exits non-zero with a message on the first check that fails.
const { chromium } = require("playwright-core");
const path = require("path");

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
    await new Promise((r) => setTimeout(r, 100));
  }
  fail(`${what}: not reached in ${ms}ms (last: ${JSON.stringify(last)})`);
}

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url + "/#token=" + token);
    await page.waitForSelector("body[data-loaded=true]", { timeout: 15000 });
    if ((await page.evaluate(() => location.hash)) !== "") fail("the token stayed in the address bar");

    const status = () => page.evaluate(async () => (await fetch("/status")).json());
    const stateText = () => page.textContent('[data-test="state"]');
    await waitFor("state working", async () => (await stateText()) === "working" || (await stateText()));

    // The graph: every node and edge the spec implies.
    for (const id of expect.nodes || []) {
      if (!(await page.$(`[data-node="${id}"]`))) fail(`graph lacks node ${id}`);
    }
    for (const e of expect.edges || []) {
      if (!(await page.$(`[data-edge="${e}"]`))) fail(`graph lacks edge ${e}`);
    }
    const st = await status();
    for (const c of Object.keys(st.computations)) {
      if (!(await page.$(`[data-node="${c}"][data-kind="computation"]`))) fail(`graph lacks computation ${c} of /status`);
    }

    // The numbers: the tables show what /status says (the pipeline has
    // processed everything, so they are stable).
    await waitFor("computation counters equal /status", async () => {
      const s = await status();
      for (const [c, k] of Object.entries(s.computations)) {
        const shown = await page.textContent(`[data-comp="${c}"] [data-field="inputs"]`);
        if (Number(shown) !== k.Inputs) return `${c}: page ${shown}, /status ${k.Inputs}`;
        const out = await page.textContent(`[data-comp="${c}"] [data-field="outputs"]`);
        if (Number(out) !== k.Outputs) return `${c} outputs: page ${out}, /status ${k.Outputs}`;
      }
      return true;
    });
    await waitFor("partitions equal /status", async () => {
      const s = await status();
      const rows = await page.$$eval("[data-partition]", (rs) => rs.map((r) => r.dataset.partition));
      const want = s.partitions.map((p) => p.Partition);
      return JSON.stringify(rows.sort()) === JSON.stringify(want.sort()) || { rows, want };
    });
    const lagCells = await page.$$eval('[data-field="lag"]', (cs) => cs.map((c) => c.textContent));
    if (!lagCells.includes("0")) fail(`no source partition shows lag 0: ${lagCells}`);
    await waitFor("chart has points", async () => (await page.evaluate(() => window.__weir.last.series.length)) >= 2);

    // Without the token, Pause is refused and nothing changes.
    await page.fill('[data-test="token"]', "");
    await page.dispatchEvent('[data-test="token"]', "change");
    await page.click('button[data-action="pause"]');
    await waitFor("refusal shown", async () => (await page.textContent('[data-test="message"]')).includes("admin token"));
    if ((await status()).state !== "working") fail("a click without the token changed the state");

    // With it, Pause pauses and Start resumes.
    await page.fill('[data-test="token"]', token);
    await page.dispatchEvent('[data-test="token"]', "change");
    await page.click('button[data-action="pause"]');
    await waitFor("page shows paused", async () => (await stateText()) === "paused" || (await stateText()));
    if ((await status()).state !== "paused") fail("/status does not say paused after the click");
    await page.screenshot({ path: path.join(artifacts, "console-paused.png"), fullPage: true });
    await page.click('button[data-action="start"]');
    await waitFor("page shows working", async () => (await stateText()) === "working" || (await stateText()));
    await page.screenshot({ path: path.join(artifacts, "console.png"), fullPage: true });
    if (errors.length) fail("page errors: " + errors.join("; "));
    console.log("console e2e: ok");
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.error("console e2e: FAILED: " + e.message);
  process.exit(1);
});

// Drives sensordb's graph page in headless Chromium (Debian's, through playwright-core) the way
// a person does: open the page, pick database, measurement and field, read what the plot drew,
// zoom by dragging across the plot, and save a screenshot. The last line of stdout is a JSON
// report for the Rust test to check.
//
//   node graph_page.cjs PLAYWRIGHT_CORE_DIR URL DATABASE MEASUREMENT FIELD SCREENSHOT
"use strict";

const [playwrightDir, url, database, measurement, field, screenshot] = process.argv.slice(2);
const { chromium } = require(playwrightDir);

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    // The machine's network is closed: without these Chromium keeps calling home.
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  const report = { graphRequests: [] };
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 700 } });
    page.on("request", (r) => { if (r.url().includes("/sensordb/graph")) report.graphRequests.push(r.url()); });
    page.on("pageerror", (e) => { report.pageError = String(e); });
    await page.goto(url + "/");
    await page.waitForFunction((db) => [...document.querySelectorAll("#db option")].some((o) => o.value === db), database);
    await page.selectOption("#db", database);
    await page.waitForFunction((m) => [...document.querySelectorAll("#measurement option")].some((o) => o.value === m), measurement);
    await page.selectOption("#measurement", measurement);
    await page.waitForFunction((f) => [...document.querySelectorAll("#field option")].some((o) => o.value === f), field);
    await page.selectOption("#field", field);
    const drawn = () => page.evaluate(() => window.sensordbGraph.data && window.sensordbGraph.queries.length);
    await page.waitForFunction(() => window.sensordbGraph.data !== null && document.querySelector("#plot canvas") !== null);
    // Let the last view's answer land (each selection asks once).
    await page.waitForTimeout(300);
    report.before = await page.evaluate(() => ({ query: window.sensordbGraph.lastQuery, data: window.sensordbGraph.data }));
    report.status = await page.textContent("#status");
    report.canvas = await page.evaluate(() => { const c = document.querySelector("#plot canvas"); return { width: c.width, height: c.height }; });
    const queriesBefore = await drawn();
    // Zoom: drag across the middle fifth of the plot area.
    const over = await page.locator(".u-over").boundingBox();
    const y = over.y + over.height / 2;
    await page.mouse.move(over.x + over.width * 0.4, y);
    await page.mouse.down();
    await page.mouse.move(over.x + over.width * 0.5, y, { steps: 5 });
    await page.mouse.move(over.x + over.width * 0.6, y, { steps: 5 });
    await page.mouse.up();
    await page.waitForFunction((n) => window.sensordbGraph.queries.length > n, queriesBefore);
    await page.waitForTimeout(300);
    report.after = await page.evaluate(() => ({ query: window.sensordbGraph.lastQuery, data: window.sensordbGraph.data }));
    await page.screenshot({ path: screenshot });
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(report));
}

main().catch((e) => { console.error(e); process.exit(1); });

// Drives the Switchboard web console in headless Chromium for
// e2e/console_test.go, which starts the hub, scripts the agents and passes
// what to look for in the environment:
//
//   CONSOLE_URL  http://127.0.0.1:PORT/console      ADMIN_TOKEN  the admin token
//   CHROMIUM     the browser executable             ARTIFACTS    where screenshots go
//   CHAT_ID      the conversation to watch          OPENER_TEXT  text of its first turn
//   TURN2_TEXT   text the second turn will carry    TRACE_ID     a trace to search for
//   DEAD_ID      a dead letter to replay
//
// It prints "STEP name" when the Go test should move the conversation on,
// and "DONE" at the end. Browsers are never downloaded: the executable is
// Debian's chromium package.
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`missing ${name}`);
  return v;
};
const base = env("CONSOLE_URL");
const artifacts = env("ARTIFACTS");
const timeout = 20000;

const step = (name) => console.log(`STEP ${name}`);
const log = (msg) => console.log(msg);

const profile = mkdtempSync(join(tmpdir(), "switchboard-console-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: env("CHROMIUM"),
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
  viewport: { width: 1280, height: 860 },
  locale: "en-US",
  timezoneId: "UTC",
});
const failures = [];
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(timeout);
  page.on("pageerror", (err) => failures.push(`page error: ${err.message}`));
  page.on("console", (msg) => {
    if (msg.type() === "error") failures.push(`console error: ${msg.text()}`);
  });

  // Sign in: a signed-out visit lands on the form, which leads back.
  await page.goto(`${base}/conversations/${env("CHAT_ID")}`);
  await page.waitForURL(/\/console\/sign-in/);
  await page.getByLabel("Token").fill("wrong-token");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").filter({ hasText: "unknown" }).waitFor();
  await page.getByLabel("Token").fill(env("ADMIN_TOKEN"));
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(new RegExp(`/console/conversations/${env("CHAT_ID")}$`));
  failures.length = 0; // the refused sign-in above answered 401 on purpose
  log("signed in");

  // The conversation updates while we watch: no reload from here on.
  const transcript = page.locator("[data-transcript]");
  await transcript.getByText(env("OPENER_TEXT")).waitFor();
  const navigations = [];
  page.on("framenavigated", (f) => { if (f === page.mainFrame()) navigations.push(f.url()); });
  // The peer's forged heading is inside an untrusted box, not a section.
  await page.locator("details.doc").first().locator("summary").first().click();
  step("watching-conversation");
  await transcript.getByText(env("TURN2_TEXT")).waitFor();
  await page.locator("[data-turns]").filter({ hasText: "2" }).waitFor();
  log("second turn arrived live");
  await page.screenshot({ path: join(artifacts, "02-conversation-live.png"), fullPage: true });
  step("watching-end");
  await page.locator("#live .state.st-ended").first().waitFor();
  await transcript.getByText("See you! [[request_conversation_end]]").waitFor();
  if (navigations.length) throw new Error(`the page reloaded while watching: ${navigations.join(", ")}`);
  if (!(await page.locator("details.doc").first().evaluate((d) => d.open))) throw new Error("a live update closed an open document");
  log("conversation ended live");
  await page.screenshot({ path: join(artifacts, "03-conversation-ended.png"), fullPage: true });
  await page.getByRole("button", { name: "Collapse all" }).click();
  if (await page.locator("details.doc[open]").count()) throw new Error("collapse all left documents open");
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: join(artifacts, "00-console.png") }); // the README's picture

  // Overview, by keyboard: the skip link is the first stop on a fresh page.
  await page.getByRole("link", { name: "Overview" }).click();
  await page.getByRole("heading", { name: "Threshold status" }).waitFor();
  await page.keyboard.press("Tab");
  if ((await page.evaluate(() => document.activeElement?.textContent)) !== "Skip to content") throw new Error("the skip link is not the first tab stop");
  await page.keyboard.press("Enter");
  if ((await page.evaluate(() => document.activeElement?.id)) !== "main") throw new Error("the skip link does not lead to the content");
  await page.getByText("Deliveries per second").waitFor();
  await page.locator(".tile .big").nth(1).filter({ hasNotText: "…" }).waitFor(); // the rate arrives over the live stream
  await page.screenshot({ path: join(artifacts, "01-overview.png") });

  // A trace, found by searching for its id.
  await page.getByRole("link", { name: "Traces" }).click();
  await page.getByLabel("Trace id or message id").fill(env("TRACE_ID"));
  await page.getByRole("button", { name: "Open" }).click();
  await page.waitForURL(new RegExp(`/console/traces/${env("TRACE_ID")}$`));
  for (const status of ["sent", "delivered", "failed", "dead"]) await page.locator(`.trace .state.st-${status}`).first().waitFor();
  await page.screenshot({ path: join(artifacts, "04-trace.png"), fullPage: true });
  log("trace opened");

  // Replay the dead letter through its confirmation step.
  await page.getByRole("link", { name: "Dead letters" }).click();
  await page.getByRole("link", { name: env("DEAD_ID") }).click();
  await page.getByText("summarizer offline").first().waitFor();
  await page.getByRole("link", { name: "Replay…" }).click();
  await page.getByRole("heading", { name: "Replay this dead letter?" }).waitFor();
  await page.getByRole("button", { name: "Yes, replay it" }).click();
  await page.getByRole("status").filter({ hasText: "Replayed as dlv_" }).waitFor();
  await page.screenshot({ path: join(artifacts, "05-dead-letter-replayed.png"), fullPage: true });
  log("dead letter replayed");

  // A phone: nothing wider than the screen.
  await page.setViewportSize({ width: 390, height: 844 });
  for (const path of [`/conversations/${env("CHAT_ID")}`, "/", "/agents", `/traces/${env("TRACE_ID")}`, "/dead-letters", "/worlds"]) {
    await page.goto(base + path);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    if (overflow > 1) throw new Error(`${path} is ${overflow}px wider than a phone screen`);
  }
  await page.goto(`${base}/conversations/${env("CHAT_ID")}`);
  await page.screenshot({ path: join(artifacts, "06-phone-conversation.png"), fullPage: true });
  log("phone layout fits");

  // Sign out: back to the form, and the pages are closed again.
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL(/\/console\/sign-in/);
  await page.goto(`${base}/agents`);
  await page.waitForURL(/\/console\/sign-in/);
  log("signed out");

  if (failures.length) throw new Error(failures.join("\n"));
  log("DONE");
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}

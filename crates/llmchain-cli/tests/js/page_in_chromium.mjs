// The page `llmchain serve` serves at `/`, in a real browser: headless Chromium driven
// over the DevTools protocol by puppeteer-core. Run by `tests/page_in_chromium.rs`
// with puppeteer-core resolvable from this file's directory.
//
//   node page_in_chromium.mjs BASE_URL CHROMIUM SCREENSHOT USER_DATA_DIR
//
// Types a message, sends it, sees the text stream in, clicks Approve, sees the tool's
// result and the answer, reloads and sees the conversation again (and in the list);
// everything the model said is text, never markup. Prints `OK <json>` at the end.

import assert from 'node:assert/strict';
import puppeteer from 'puppeteer-core';

const [base, executablePath, screenshot, userDataDir] = process.argv.slice(2);
const browser = await puppeteer.launch({
  executablePath,
  userDataDir,
  headless: true,
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-dev-shm-usage',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
const report = {};
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 760 });
  const errors = [];
  const notFound = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('response', (r) => { if (r.status() === 404) notFound.push(r.url()); });
  page.on('dialog', (d) => {
    errors.push(`unexpected dialog: ${d.message()}`);
    d.dismiss();
  });
  await page.goto(`${base}/`, { waitUntil: 'networkidle0' });

  // An empty chat says what answers it; the page has an icon.
  await page.waitForFunction(() => /profile default/.test(document.querySelector('.empty')?.textContent || ''), { timeout: 10000 });
  const empty = await page.$eval('.empty', (e) => e.textContent);
  assert.match(empty, /profile default · openai · m/);
  assert.equal(await page.$$eval('link[rel=icon]', (ls) => ls.length), 1);

  // Every length the assistant's text had, as the page drew it.
  await page.evaluate(() => {
    window.textLengths = [];
    new MutationObserver(() => {
      const t = [...document.querySelectorAll('.msg[data-role=assistant] .text')]
        .map((e) => e.textContent)
        .join('');
      const l = window.textLengths;
      if (l[l.length - 1] !== t.length) l.push(t.length);
    }).observe(document.getElementById('log'), { subtree: true, childList: true, characterData: true });
  });

  await page.type('#input', 'Please save my notes.');
  await page.click('#send');

  // The lead-in text streams, then the call waits with Approve and Deny.
  await page.waitForSelector('.tool[data-state="approval-requested"] button.primary', { timeout: 30000 });
  const lead = await page.$eval('.msg[data-role=assistant] .text', (e) => e.textContent);
  assert.equal(lead, 'I will write the notes file for you now.');
  const lengths = await page.evaluate(() => window.textLengths);
  report.textLengthsSeen = lengths.length;
  assert.ok(lengths.length >= 3, `the text did not stream: ${JSON.stringify(lengths)}`);
  const args = await page.$eval('.tool .args', (e) => e.textContent);
  assert.match(args, /"path": "notes.txt"/);

  await page.click('.tool[data-state="approval-requested"] button.primary');
  await page.waitForSelector('.tool[data-state="output-available"]', { timeout: 30000 });
  await page.waitForFunction(
    () => document.querySelector('#send') && !document.querySelector('#send').disabled,
    { timeout: 30000 },
  );
  const answer = await page.$$eval('.msg[data-role=assistant] .text', (es) => es.map((e) => e.textContent).join('|'));
  assert.match(answer, /Saved <b>notes\.txt<\/b> <img src=x onerror=alert\(1\)>\./);
  // Markup from the model is text: no element was made of it.
  assert.equal(await page.$$eval('#log b, #log img', (es) => es.length), 0);
  const output = await page.$eval('.tool .output', (e) => e.textContent);
  assert.match(output, /wrote notes\.txt/);
  // States in plain words.
  assert.equal(await page.$eval('.tool .state', (e) => e.textContent), 'Ran');
  await page.screenshot({ path: screenshot, fullPage: true });

  // Reload: the conversation comes back from the store, and it is in the list.
  const url = page.url();
  assert.match(url, /#c[0-9a-f]{24}$/);
  await page.reload({ waitUntil: 'networkidle0' });
  await page.waitForSelector('.tool[data-state="output-available"]', { timeout: 30000 });
  const afterReload = await page.$$eval('.msg', (es) => es.map((e) => e.dataset.role));
  assert.deepEqual(afterReload, ['user', 'assistant']);
  const texts = await page.$$eval('.msg .text', (es) => es.map((e) => e.textContent));
  assert.deepEqual(texts, [
    'Please save my notes.',
    'I will write the notes file for you now.',
    'Saved <b>notes.txt</b> <img src=x onerror=alert(1)>.',
  ]);
  const listed = await page.$$eval('#chats a', (as) => as.map((a) => a.textContent));
  assert.deepEqual(listed, ['Please save my notes.']);

  // A phone (390 px): the chats are a drawer, the conversation and the box have the width.
  await page.setViewport({ width: 390, height: 844, isMobile: true, hasTouch: true });
  await page.waitForSelector('#menu', { visible: true });
  const phone = await page.evaluate(() => ({
    nav: document.querySelector('nav').getBoundingClientRect().right,
    input: document.querySelector('#input').getBoundingClientRect().width,
    log: document.querySelector('#log').getBoundingClientRect().width,
    overflow: document.documentElement.scrollWidth - window.innerWidth,
  }));
  assert.ok(phone.nav <= 0, `the drawer is closed: ${JSON.stringify(phone)}`);
  assert.ok(phone.input >= 200 && phone.log >= 360, `wide enough: ${JSON.stringify(phone)}`);
  assert.ok(phone.overflow <= 0, `nothing sticks out sideways: ${JSON.stringify(phone)}`);
  await page.screenshot({ path: screenshot.replace(/\.png$/, '-390.png') });
  await page.click('#menu');
  await page.waitForFunction(() => document.querySelector('nav').getBoundingClientRect().left >= 0, { timeout: 5000 });
  await new Promise((r) => setTimeout(r, 300));
  await page.screenshot({ path: screenshot.replace(/\.png$/, '-390-drawer.png') });
  await page.click('#scrim', { offset: { x: 380, y: 400 } }).catch(() => {});
  await page.mouse.click(380, 400);
  await page.waitForFunction(() => document.querySelector('nav').getBoundingClientRect().right <= 0, { timeout: 5000 });

  // A desktop (1280 px): the list beside the chat, no bar.
  await page.setViewport({ width: 1280, height: 800 });
  const desk = await page.evaluate(() => ({
    nav: document.querySelector('nav').getBoundingClientRect().width,
    bar: getComputedStyle(document.querySelector('#bar')).display,
  }));
  assert.ok(desk.nav >= 200 && desk.bar === 'none', JSON.stringify(desk));
  await page.screenshot({ path: screenshot.replace(/\.png$/, '-1280.png') });

  // A new chat asks the server nothing it does not have.
  await page.click('#new');
  await page.waitForSelector('.empty');
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(notFound, []);
  assert.deepEqual(errors, []);
  report.url = url;
} finally {
  await browser.close();
}
console.log(`OK ${JSON.stringify(report)}`);

export default function (component) {
  const { data, setStateValue } = component;
  const w = window;
  let L = w.__pagedLedger;
  if (!L) {
    L = w.__pagedLedger = { nonce: Math.random().toString(36).slice(2) + Date.now().toString(36), seq: 0,
                            log: [], buttons: {}, keys: {}, send: null, playing: false, interval: 1000,
                            lastTick: 0, ateSpace: false, page: '', session: null, base: 0 };
    const push = (action) => {
      if (!L.send) return;
      L.seq += 1;
      L.log.push([L.seq, action, L.page]);
      if (L.log.length > %(max_log)d) L.log.shift();
      L.send({ nonce: L.nonce, seq: L.seq, log: L.log.slice(), session: L.session, base: L.base });
    };
    const buttonOf = (action) => {
      const cls = Object.keys(L.buttons).find((c) => L.buttons[c] === action);
      return cls ? document.querySelector('.' + cls + ' button') : null;
    };
    w.addEventListener('click', (e) => {
      if (!L.send || !e.target || !e.target.closest) return;
      for (const [cls, action] of Object.entries(L.buttons)) {
        const btn = e.target.closest('.' + cls + ' button');
        if (btn) {
          e.stopImmediatePropagation(); e.preventDefault();
          if (!btn.disabled) push(action);
          return;
        }
      }
    }, true);
    const typing = (t) => t && t.closest && t.closest(
      'input, textarea, select, [contenteditable="true"], [role="slider"], [role="combobox"], [role="listbox"]');
    w.addEventListener('keydown', (e) => {
      if (!L.send || e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
      const action = L.keys[e.key];
      const btn = action && buttonOf(action);
      if (!btn) return;
      e.stopImmediatePropagation(); e.preventDefault();
      if (e.key === ' ') L.ateSpace = true;  // its keyup must not also press a focused button
      push(action);  // even if the button still looks disabled: keys queued ahead of a rerun act in order
    }, true);
    // A toggle, checkbox, radio, slider or menu set with the mouse keeps the focus, and then owns the keys (space
    // flips the toggle or opens the menu, arrows move the radio or slider): the teacher who just turned on presenter
    // mode, or picked 4 steps/s, and presses space would undo it. Set by a pointer, it gives the focus back (a menu
    // once it is closed again), so the shortcuts work; reached with Tab, it keeps it.
    w.addEventListener('pointerup', () => setTimeout(() => {
      const a = document.activeElement;
      if (!L.send || !a || !a.matches) return;
      if (a.matches('input[type="checkbox"], input[type="radio"], [role="slider"], [role="switch"], [role="radio"]')
          || (a.matches('[role="combobox"]') && a.getAttribute('aria-expanded') !== 'true')) a.blur();
    }, 150), true);
    w.addEventListener('keyup', (e) => {
      if (e.key === ' ' && L.ateSpace) { L.ateSpace = false; e.stopImmediatePropagation(); e.preventDefault(); }
    }, true);
    setInterval(() => {  // playing: one tick per interval, only while the app is idle (ticks never pile up)
      if (!L.playing || !L.send) return;
      const app = document.querySelector('[data-testid="stApp"]');
      if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return;
      const now = performance.now();
      if (now - L.lastTick < L.interval) return;
      L.lastTick = now;
      push('tick');
    }, 25);
  }
  L.buttons = data.buttons; L.keys = data.keys; L.interval = data.interval_ms; L.page = data.page;
  if (data.session !== L.session) { L.session = data.session; L.base = L.seq; }  // logged so far: another session
  if (data.playing && !L.playing) L.lastTick = performance.now();
  L.playing = !!data.playing;
  const send = (value) => setStateValue('log', value);
  L.send = send;
  return () => { if (L.send === send) { L.send = null; L.playing = false; L.buttons = {}; L.keys = {}; } };
}

// Ramino's browser client: MQTT over WebSockets (mqtt.js), msgpack payloads (@msgpack/msgpack).
// The server decides every move: this page only shows the view and offers the `legal` list.
import mqtt from "mqtt";
import { encode, decode } from "@msgpack/msgpack";
import { cardText, isRed, describe, meld } from "./cards.js";
import { openReplay, setUpReplay } from "./replay.js";

const PREFIX = "ramino/v1";
const $ = (id) => document.getElementById(id);
const state = {
  client: null, name: "", pending: new Map(), listings: new Map(), variants: [],
  table: "", seq: 0, seat: -1, view: null, legal: [], status: "", deadline: 0,
  listing: null, byRank: false, results: [], invite: "", joinCode: "", order: [], selected: new Set(),
  ready: new Set(), arranged: [], shard: 0, serverLink: "",
};

function hex(bytes) {
  const a = new Uint8Array(bytes); crypto.getRandomValues(a);
  return Array.from(a, (b) => b.toString(16).padStart(2, "0")).join("");
}
function say(text) { $("error").textContent = text; }

function request(topic, cmd, seq = null) {
  const id = hex(8);
  return new Promise((resolve) => {
    state.pending.set(id, resolve);
    state.client.publish(topic, encode({ id, cmd, seq }), { qos: 1 });
  });
}
// CRC-32 (IEEE), the lobby shard of a name: crc32(UTF-8 name) mod shards (protocol §3).
const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(text) {
  let c = 0xffffffff;
  for (const byte of new TextEncoder().encode(text)) c = CRC_TABLE[(c ^ byte) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function useShards(shards) { state.shard = crc32(state.name) % Math.max(1, shards || 1); }
// A lobby command goes to the sender's shard; `lobby/wrong_shard` names the shard count: resend there.
async function lobby(cmd) {
  for (let attempt = 0; ; attempt++) {
    const reply = await request(`${PREFIX}/lobby/${state.shard}/${state.name}`, cmd);
    if (reply.code !== "lobby/wrong_shard" || attempt > 0) return reply;
    useShards(reply.result.shards);
  }
}
const tableCmd = (table, cmd, seq = null) => request(`${PREFIX}/table/${table}/cmd/${state.name}`, cmd, seq);

async function checked(promise) {
  const reply = await promise;
  if (!reply.ok) say(`${reply.code}: ${reply.message}`); else say("");
  return reply;
}

function login(name, password) {
  state.name = name;
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  // The broker's WebSocket URL if the server names one (ramino serve --web-broker), else /mqtt here.
  const broker = document.querySelector('meta[name="ramino-broker"]')?.content;
  const client = mqtt.connect(broker || `${scheme}://${location.host}/mqtt`, {
    username: name, password, clientId: `${name}-${hex(4)}`, clean: true, protocolVersion: 4,
    keepalive: 30, reconnectPeriod: 2000,
    will: { topic: `${PREFIX}/presence/${name}`, payload: encode({ type: "presence", online: false }), qos: 1, retain: false },
  });
  state.client = client;
  client.on("connect", () => onConnect(password));
  client.on("message", onMessage);
  client.on("offline", () => { $("status").textContent = "offline, reconnecting…"; });
  client.on("error", (error) => { $("login-error").textContent = `cannot connect: ${error.message}`; });
}

async function onConnect(password) {
  $("status").textContent = `connected as ${state.name}`;
  localStorage.setItem("ramino.login", JSON.stringify({ name: state.name, password }));
  const c = state.client;
  c.subscribe([`${PREFIX}/inbox/${state.name}`, `${PREFIX}/tables/+`, `${PREFIX}/server/status`], { qos: 0 });
  c.publish(`${PREFIX}/presence/${state.name}`, encode({ type: "presence", online: true }), { qos: 1 });
  // Requests waiting for a reply are resent with the same id by mqtt.js's queue; the tables are resynced.
  const welcome = await checked(lobby({ type: "hello", versions: [1], client: "ramino-web/0.1" }));
  if (welcome.ok) useShards(welcome.result.shards);
  const variants = await checked(lobby({ type: "list_variants" }));
  if (variants.ok) fillVariants(variants.result.variants);
  $("login").hidden = true;
  const saved = state.table || localStorage.getItem("ramino.table") || "";
  if (saved) await openTable(saved, localStorage.getItem("ramino.invite") || ""); else showLobby();
}

function onMessage(topic, payload) {
  if (payload.length === 0) {
    if (topic.startsWith(`${PREFIX}/tables/`)) { state.listings.delete(topic.split("/")[3]); renderLobby(); }
    return;
  }
  let message;
  try { message = decode(payload); } catch { return; }
  if (topic === `${PREFIX}/server/status`) { onStatus(message); return; }
  if (topic.startsWith(`${PREFIX}/tables/`)) {
    state.listings.set(message.table, message); renderLobby();
    if (message.table === state.table) { state.listing = message; renderGame(); }
  } else if (topic === `${PREFIX}/inbox/${state.name}`) {
    if (message.type === "reply") {
      const resolve = state.pending.get(message.id);
      if (resolve) { state.pending.delete(message.id); resolve(message); }
    } else if (message.type === "update") onUpdate(message);
  } else if (topic === `${PREFIX}/table/${state.table}/chat`) {
    addLog(`${message.sender}: ${message.text}`);
  } else if (topic === `${PREFIX}/table/${state.table}/state` && state.seat < 0 && message.seq > state.seq) {
    // A spectator gets no updates: the retained snapshot (republished within a second) is its view.
    state.listing = message.table; state.seq = message.seq; state.view = message.view;
    state.legal = []; state.deadline = message.deadline; state.status = message.table.status;
    renderGame();
  }
}

// A server that restarted (`started_at`) or got its broker link back (`reconnected_at`) may
// have lost updates meant for us: resync the open table (protocol §12).
function onStatus(status) {
  if (!status.online) return;
  useShards(status.shards);
  const link = `${status.started_at}/${status.reconnected_at}`;
  if (state.serverLink && link !== state.serverLink && state.table) resync();
  state.serverLink = link;
}

function onUpdate(update) {
  if (update.table !== state.table || update.seq <= state.seq) return;
  const first = update.events.length ? update.events[0].seq : update.seq;
  if (state.seq && first !== state.seq + 1) { resync(); return; }  // a gap: catch up
  state.seq = update.seq; state.seat = update.seat; state.view = update.view;
  state.legal = update.legal; state.status = update.status; state.deadline = update.deadline;
  for (const logged of update.events) noteEvent(logged.event, logged.seq);
  renderGame();
}

function noteEvent(event, seq) {
  if (state.listing && (event.type === "player_sat" || event.type === "player_stood")) {
    // A private table has no listing on the lobby topic: its seats follow the events.
    const seats = [...state.listing.seats]; seats[event.seat] = event.type === "player_sat" ? event.player : "";
    state.listing = { ...state.listing, seats };
  }
  const names = state.listing ? state.listing.seats : [];
  addLog(describe(event, names), seq, event.type);
  if (event.type === "game_started") state.results = [];
  if (event.type === "hand_ended") state.results.push(event);
  if (event.type === "player_ready") state.ready.add(event.seat);
  if (event.type === "dealt") state.ready.clear();
  if (event.type === "game_ended" && state.seat >= 0) remember(state.table);
}
function addLog(text, seq = 0, type = "chat") {
  const item = document.createElement("li"); item.textContent = text;
  item.dataset.type = type; if (seq) item.dataset.seq = String(seq);
  $("log").append(item);
}

// The tables this browser played a game at, newest first, for their replays.
function played() { return JSON.parse(localStorage.getItem("ramino.played") || "[]"); }
function remember(table) {
  localStorage.setItem("ramino.played", JSON.stringify([table, ...played().filter((t) => t !== table)].slice(0, 10)));
}

async function resync() {
  const reply = await tableCmd(state.table, { type: "resync" });
  if (reply.ok) applySynced(reply.result);
}
function applySynced(synced) {
  state.listing = synced.table; state.seq = synced.seq; state.seat = synced.seat;
  state.view = synced.view; state.legal = synced.legal; state.deadline = synced.deadline;
  state.status = synced.table.status;
  if (synced.view && synced.view.last_result && !state.results.length) state.results.push(synced.view.last_result);
  if (synced.view && synced.view.phase === "game_over" && state.seat >= 0) remember(state.table);
  renderGame();
}

async function openTable(table, invite = "") {
  if (state.table !== table) {
    state.table = table; state.seq = 0; state.results = []; state.order = []; state.ready.clear(); $("log").textContent = "";
  }
  localStorage.setItem("ramino.table", table);
  state.client.subscribe([`${PREFIX}/table/${table}/chat`, `${PREFIX}/table/${table}/state`], { qos: 0 });
  const reply = await checked(tableCmd(table, { type: "join", invite_code: invite }));
  if (!reply.ok) { state.table = ""; localStorage.removeItem("ramino.table"); showLobby(); return; }
  state.joinCode = invite;
  applySynced(reply.result);
  $("lobby").hidden = true; $("game").hidden = false;
}

function showLobby() {
  if (state.table) state.client.unsubscribe([`${PREFIX}/table/${state.table}/chat`, `${PREFIX}/table/${state.table}/state`]);
  state.table = ""; state.invite = ""; localStorage.removeItem("ramino.table"); localStorage.removeItem("ramino.invite");
  $("game").hidden = true; $("replay").hidden = true; $("lobby").hidden = false; renderLobby();
}

function renderLobby() {
  const body = $("tables").tBodies[0]; body.textContent = "";
  for (const listing of [...state.listings.values()].sort((a, b) => a.table.localeCompare(b.table))) {
    const row = body.insertRow();
    for (const text of [listing.table, listing.variant, listing.seats.map((s) => s || "—").join(", "), listing.status]) {
      row.insertCell().textContent = text;
    }
    const cell = row.insertCell();
    if (listing.status === "finished") {
      const replayButton = document.createElement("button");
      replayButton.type = "button"; replayButton.textContent = "Replay";
      replayButton.addEventListener("click", () => openReplay(listing.table, mineSeat(listing)));
      cell.append(replayButton);
    }
    const free = listing.seats.includes("");
    const mine = listing.seats.includes(state.name);
    const button = document.createElement("button");
    button.textContent = mine ? "Open" : free && listing.status !== "playing" ? "Sit" : "Watch";
    button.addEventListener("click", async () => {
      if (!mine && free && listing.status !== "playing") {
        const reply = await checked(tableCmd(listing.table, { type: "sit", seat: -1, invite_code: "" }));
        if (!reply.ok) return;
      }
      openTable(listing.table);
    });
    cell.append(button);
  }
  const list = $("played"); list.textContent = "";
  for (const table of played()) {
    const item = document.createElement("li"); const button = document.createElement("button");
    button.type = "button"; button.textContent = `Replay ${table}`;
    button.addEventListener("click", () => openReplay(table, state.name));
    item.append(button); list.append(item);
  }
}
function mineSeat(listing) { const seat = listing.seats.indexOf(state.name); return seat >= 0 ? String(seat) : ""; }

function fillVariants(variants) {
  state.variants = variants;
  const select = $("variant"); select.textContent = "";
  for (const v of variants) {
    const option = document.createElement("option");
    option.value = v.name; option.textContent = `${v.title} (${v.min_players}-${v.max_players})`;
    select.append(option);
  }
  select.value = variants.some((v) => v.name === "knock") ? "knock" : variants[0].name;
  fillOptions();
}

function fillOptions() {
  const variant = state.variants.find((v) => v.name === $("variant").value);
  const box = $("options"); box.querySelectorAll("label").forEach((l) => l.remove());
  if (!variant) return;
  $("seats").min = variant.min_players; $("seats").max = variant.max_players;
  $("seats").value = Math.max(variant.min_players, Math.min(2, variant.max_players));
  for (const option of variant.options) {
    const label = document.createElement("label");
    label.title = option.help;
    const value = variant.defaults[option.name];
    let input;
    if (option.kind === "bool") {
      input = document.createElement("input"); input.type = "checkbox"; input.checked = Boolean(value);
    } else if (option.kind === "choice") {
      input = document.createElement("select");
      for (const choice of option.choices) { const o = document.createElement("option"); o.value = o.textContent = choice; input.append(o); }
      input.value = value;
    } else {
      input = document.createElement("input"); input.type = "text"; input.size = 9;
      input.value = value === null || value === undefined ? "unlimited" : String(value);
    }
    input.dataset.option = option.name; input.dataset.kind = option.kind; input.name = `option-${option.name}`;
    label.append(`${option.name} `, input); box.append(label);
  }
}

function readOptions() {
  const options = {};
  for (const input of $("options").querySelectorAll("[data-option]")) {
    const kind = input.dataset.kind;
    if (kind === "bool") options[input.dataset.option] = input.checked;
    else if (kind === "choice") options[input.dataset.option] = input.value;
    else if (input.value.trim() === "unlimited") options[input.dataset.option] = null;
    else options[input.dataset.option] = Number.parseInt(input.value, 10);
  }
  return options;
}

async function createTable() {
  const isPrivate = $("private").checked;
  const reply = await checked(lobby({
    type: "create_table", variant: $("variant").value, options: readOptions(),
    seats: Number.parseInt($("seats").value, 10), private: isPrivate,
    move_seconds: Number($("move-seconds").value) || 0, max_timeouts: 3,
    hand_pause_seconds: Number($("hand-pause").value) || 0, sit: true,
  }));
  if (!reply.ok) return;
  state.invite = reply.result.invite_code;
  await openTable(reply.result.table);
}

function cardButton(card, onClick) {
  const element = document.createElement(onClick ? "button" : "span");
  element.className = `card${card < 0 ? " back" : ""}${isRed(card) ? " red" : ""}`;
  element.textContent = card < 0 ? "▒▒" : cardText(card);
  element.setAttribute("aria-label", card < 0 ? "hidden card" : cardText(card, true));
  if (onClick) { element.type = "button"; element.addEventListener("click", onClick); }
  return element;
}

function sortedHand(hand) {
  const key = (c) => { const f = c & 63; return state.byRank ? (f % 13) * 4 + Math.floor(f / 13) : f; };
  const sorted = [...hand].sort((a, b) => key(a) - key(b));
  // The player's own order (drag, or Alt+arrow keys) first; new cards after, sorted.
  const kept = state.order.filter((c) => hand.includes(c));
  state.order = [...kept, ...sorted.filter((c) => !kept.includes(c))];
  return state.order;
}

function toggle(card) {
  if (state.selected.has(card)) state.selected.delete(card); else state.selected.add(card);
  renderHand(); renderActions();
  const again = $("hand").querySelector(`[data-card="${card}"]`); if (again) again.focus();
}

function moveCard(card, to) {
  const from = state.order.indexOf(card);
  if (from < 0 || to < 0 || to >= state.order.length) return;
  state.order.splice(from, 1); state.order.splice(to, 0, card);
  renderHand();
  const moved = $("hand").querySelector(`[data-card="${card}"]`); if (moved) moved.focus();
}

function renderGame() {
  if (!state.table) return;
  const listing = state.listing; const view = state.view;
  const names = listing ? listing.seats : [];
  $("game-title").textContent = `Table ${state.table}: ${listing ? listing.variant : ""} (${state.status})`;
  const invite = $("invite");
  invite.hidden = !state.invite;
  if (state.invite) invite.textContent = `Invite link: ${location.origin}/#join=${state.table}:${state.invite}`;
  const seats = $("seats-view"); seats.textContent = "";
  names.forEach((player, seat) => {
    const box = document.createElement("span");
    box.className = `seat${view && view.to_move === seat ? " to-move" : ""}`;
    const cards = view ? ` · ${view.hand_sizes[seat]} cards` : "";
    const score = view ? ` · ${view.scores[seat]} pts` : "";
    box.textContent = `${seat === state.seat ? "You" : player || "(free)"}${cards}${score}`;
    seats.append(box);
  });
  const table = $("table-view"); table.textContent = "";
  if (view) {
    table.append(`Stock: ${view.stock_size} · Discard: `);
    // The whole pile is public; Rummy 500 draws from deep in it, so show more than the top.
    const shown = view.variant === "rummy500" ? view.pile.slice(-12) : view.pile.slice(-1);
    if (view.pile.length) for (const c of shown) table.append(cardButton(c));
    else table.append("empty");
  }
  const melds = $("melds"); melds.textContent = "";
  for (const spec of view ? view.melds : []) {
    const item = document.createElement("li"); item.textContent = meld(spec); melds.append(item);
  }
  $("chat-form").hidden = state.seat < 0;
  renderHand(); renderActions(); renderScores(); renderTurn(); renderClaim();
}


function secondsLeft() { return Math.max(0, Math.round(state.deadline - Date.now() / 1000)); }

// A claim window (Rummy 500's "Rummy!", Ramino's bussare): who may claim, their answers so far,
// and when it closes. The claim and pass buttons are the `legal` moves, in the actions.
function renderClaim() {
  const box = $("claim"); const view = state.view;
  box.hidden = !view || view.phase !== "claim";
  if (box.hidden) return;
  const names = state.listing ? state.listing.seats : [];
  const kind = view.claim_kind === "bussare" ? "Bussare" : "Rummy!";
  const answers = view.claim_seats.map((seat, i) => {
    const answer = view.claim_answers[i];
    const who = seat === state.seat ? "you" : names[seat] || `seat ${seat}`;
    return `${who}: ${answer === 0 ? "deciding" : answer < 0 ? "passed" : `claims ${answer}`}`;
  }).join(", ");
  box.textContent = `Claim window (${kind}) on ${view.pile.length ? cardText(view.pile[view.pile.length - 1]) : "the pile"} · ${answers}` +
    (state.deadline > 0 ? ` · closes in ${secondsLeft()} s` : "");
}

function renderTurn() {
  const view = state.view; const turn = $("turn");
  if (!view) { turn.textContent = state.status === "waiting" ? "Waiting for players…" : ""; return; }
  if (view.phase === "game_over") {
    const names = state.listing ? state.listing.seats : [];
    turn.textContent = `Game over. Winner: ${view.winners.map((s) => (s === state.seat ? "you" : names[s])).join(", ")}`;
  } else if (state.legal.length) turn.textContent = "Your move.";
  else if (betweenHands()) turn.textContent = state.ready.has(state.seat) ? "You are ready: the next hand is dealt when everyone is." : "The hand is over.";
  else if (view.phase === "claim") turn.textContent = "Claim window open.";
  else turn.textContent = `Waiting for ${(state.listing && state.listing.seats[view.to_move]) || "…"}.`;
  const countdown = $("countdown");
  countdown.hidden = !(state.deadline > 0) || view.phase === "game_over";
  if (!countdown.hidden) {
    const what = betweenHands() ? "Next deal in" : view.phase === "claim" ? "Claim window closes in" : "Time left";
    countdown.textContent = `${what}: ${secondsLeft()} s`;
  }
}

// Between two hands of a table with a hand pause: the next deal waits for every player's `ready`.
function betweenHands() {
  const view = state.view;
  return Boolean(view) && state.status === "playing" && view.phase === "deal" && view.hand_number > 0;
}

function renderHand() {
  const hand = $("hand"); hand.textContent = "";
  const view = state.view; if (!view) return;
  for (const card of [...state.selected]) if (!view.hand.includes(card)) state.selected.delete(card);
  if (state.arranged.some((cards) => cards.some((c) => !view.hand.includes(c)))) state.arranged = [];
  const arranged = new Set(state.arranged.flat());
  const usable = new Set(state.legal.flatMap((c) => cardsOf(c) || []));
  for (const card of sortedHand(view.hand)) {
    const element = cardButton(card, () => toggle(card));
    element.setAttribute("aria-pressed", String(state.selected.has(card)));
    if (state.selected.has(card)) element.classList.add("selected");
    if (usable.has(card)) element.classList.add("legal");
    if (arranged.has(card)) element.classList.add("arranged");
    element.setAttribute("role", "listitem");
    element.dataset.card = String(card); element.draggable = true;
    element.addEventListener("dragstart", (event) => { event.dataTransfer.setData("text/plain", String(card)); });
    element.addEventListener("dragover", (event) => event.preventDefault());
    element.addEventListener("drop", (event) => {
      event.preventDefault();
      moveCard(Number(event.dataTransfer.getData("text/plain")), state.order.indexOf(card));
    });
    element.addEventListener("keydown", (event) => {
      if (!event.altKey || (event.key !== "ArrowLeft" && event.key !== "ArrowRight")) return;
      event.preventDefault();
      moveCard(card, state.order.indexOf(card) + (event.key === "ArrowLeft" ? -1 : 1));
    });
    hand.append(element);
  }
}

function actionLabel(command) {
  const names = state.listing ? state.listing.seats : [];
  switch (command.type) {
    case "draw_stock": return "Draw from the stock";
    case "discard": return `Discard ${cardText(command.card)}`;
    case "take_discard": return takeLabel(command.count);
    case "pass": return passLabel();
    case "knock": return command.card < 0 ? "Big gin: lay down all eleven cards, no discard" : `Knock, discarding ${cardText(command.card)}`;
    case "meld": return `Meld ${command.melds.map(meld).join(" | ")}`;
    case "lay_off": return `Lay off ${cardText(command.card)}${(command.card & 63) === 52 ? ` as ${cardText(command.face)}` : ""} on meld ${command.target + 1}`;
    case "swap_joker": return `Swap ${cardText(command.card)} for the joker of meld ${command.target + 1}`;
    case "claim": {
      const pile = state.view ? state.view.pile : [];
      const taken = pile.length >= command.count ? cardText(pile[pile.length - command.count]) : "";
      if (state.view && state.view.claim_kind === "bussare") return `Bussare: take ${taken} and two from the stock`;
      return command.count === 1 ? `Claim ${taken} (Rummy!)` : `Claim ${command.count} cards down to ${taken} (Rummy!)`;
    }
    default: return describe(command, names);
  }
}

function upcard() {
  const pile = state.view ? state.view.pile : [];
  return pile.length ? cardText(pile[pile.length - 1]) : "";
}
function takeLabel(count) {
  if (state.view && state.view.phase === "first_upcard") return `Take the upcard ${upcard()}`;
  if (count === 1) return `Take ${upcard()} from the pile`;
  const pile = state.view.pile;
  return `Take ${count} cards from the pile, down to ${cardText(pile[pile.length - count])}`;
}
function passLabel() {
  const phase = state.view ? state.view.phase : "";
  if (phase === "first_upcard") return `Pass on the upcard ${upcard()}`;
  if (phase === "claim") return "Pass (no claim)";
  return `Pass (leave ${upcard()})`;
}

function renderActions() {
  const box = $("actions"); box.textContent = "";
  const listing = state.listing;
  if (listing && state.seat >= 0 && !listing.seats.includes("") && state.status === "waiting") {
    addAction(box, "Start the game", () => tableCmd(state.table, { type: "start" }));
  }
  if (listing && state.seat < 0 && listing.seats.includes("") && state.status === "waiting") {
    addAction(box, "Take a seat", async () => {
      const reply = await checked(tableCmd(state.table, { type: "sit", seat: -1, invite_code: state.joinCode }));
      if (reply.ok) resync();
    });
  }
  if (state.status === "finished" && state.seat >= 0) {
    addAction(box, "Rematch", () => checked(tableCmd(state.table, { type: "rematch" })));
  }
  if (betweenHands() && state.seat >= 0 && !state.ready.has(state.seat)) {
    addAction(box, "Ready for the next hand", async () => {
      const reply = await checked(tableCmd(state.table, { type: "ready" }));
      if (reply.ok || reply.code === "table/already_ready") { state.ready.add(state.seat); renderGame(); }
    });
  }
  // Moves that use cards of the hand are offered for the cards selected: exactly those cards.
  const selected = [...state.selected].sort((a, b) => a - b).join(",");
  let hidden = 0; const offered = [];
  for (const command of state.legal) {
    const cards = cardsOf(command);
    if (cards === null) { addAction(box, actionLabel(command), () => play(command)); continue; }
    if ([...cards].sort((a, b) => a - b).join(",") === selected) {
      addAction(box, actionLabel(command), () => play(command));
      offered.push(command);
    } else hidden += 1;
  }
  // Several melds of the same cards differ in what a joker stands for: the player chooses.
  if (offered.filter((c) => c.type === "meld").length > 1 || new Set(offered.filter((c) => c.type === "lay_off").map((c) => c.target)).size < offered.filter((c) => c.type === "lay_off").length) {
    const hint = document.createElement("p"); hint.className = "hint"; hint.id = "joker-choice";
    hint.textContent = "These cards can be laid down in several ways: each move says what a joker (🃏) stands for (JK=card).";
    box.append(hint);
  }
  arrangeKnock(box, selected);
  if (hidden) {
    const hint = document.createElement("p"); hint.className = "hint";
    hint.textContent = state.selected.size
      ? `No move uses exactly the selected cards (${hidden} moves use others).`
      : `Select cards of your hand to see the ${hidden} moves that use them (discard: one card).`;
    box.append(hint);
  }
}

// Knock and Gin Rummy: the player may choose the melds a knock shows (`knock.melds`) instead of
// the server's best arrangement. The page only groups the cards; the server checks the melds.
function arrangeKnock(box, selected) {
  const knocks = state.legal.filter((c) => c.type === "knock" && c.card >= 0);
  if (!knocks.length) { state.arranged = []; return; }
  const grouped = new Set(state.arranged.flat());
  const chosen = [...state.selected];
  if (chosen.length >= 3 && !chosen.some((c) => grouped.has(c))) {
    addAction(box, `Show ${chosen.map((c) => cardText(c)).join(" ")} as a meld when I knock`, () => {
      state.arranged.push(chosen.sort((a, b) => a - b)); state.selected.clear(); renderHand(); renderActions();
    });
  }
  if (!state.arranged.length) return;
  const note = document.createElement("p"); note.id = "arranged";
  note.textContent = `Your melds for a knock: ${state.arranged.map((cards) => `[${cards.map((c) => cardText(c)).join(" ")}]`).join(" ")}`;
  box.append(note);
  addAction(box, "Clear my melds", () => { state.arranged = []; renderHand(); renderActions(); });
  for (const knock of knocks) {
    if (String(knock.card) !== selected || grouped.has(knock.card)) continue;
    const melds = state.arranged.map((cards) => ({ cards, faces: cards.map((c) => c & 63) }));
    addAction(box, `Knock showing my melds, discarding ${cardText(knock.card)}`, () => play({ ...knock, melds }));
  }
}

function cardsOf(command) {
  switch (command.type) {
    case "discard": case "lay_off": case "swap_joker": return [command.card];
    case "knock": return command.card < 0 ? null : [command.card];
    case "meld": return command.melds.flatMap((m) => m.cards);
    default: return null;
  }
}

function addAction(box, label, run) {
  const button = document.createElement("button");
  button.type = "button"; button.textContent = label;
  button.addEventListener("click", run); box.append(button);
}

async function play(command) {
  state.legal = []; state.selected.clear(); renderActions(); renderHand();
  const reply = await tableCmd(state.table, command, state.seq);
  if (!reply.ok && reply.code === "table/stale_seq" && reply.result) applySynced(reply.result);
  else if (!reply.ok) { say(`${reply.code}: ${reply.message}`); resync(); }
}

function renderScores() {
  const box = $("scores"); box.textContent = "";
  if (!state.results.length) return;
  const names = state.listing ? state.listing.seats : [];
  const heading = document.createElement("h3"); heading.textContent = "Score sheet"; box.append(heading);
  const table = document.createElement("table"); table.id = "score-sheet";
  const head = table.createTHead().insertRow();
  for (const text of ["Hand", "Ended", ...names.map((n, s) => (s === state.seat ? "You" : n))]) {
    const th = document.createElement("th"); th.textContent = text; head.append(th);
  }
  const body = table.createTBody();
  for (const result of state.results) {
    const row = body.insertRow();
    row.insertCell().textContent = String(result.hand);
    row.insertCell().textContent = result.reason;
    result.points.forEach((points, seat) => { row.insertCell().textContent = `${points} (total ${result.totals[seat]})`; });
  }
  box.append(table);
  if (state.view && state.view.phase === "game_over") {
    const table = state.table; const seat = state.seat >= 0 ? String(state.seat) : "all";
    addAction(box, "Replay this game", () => openReplay(table, seat, String(state.listing ? state.listing.game : "")));
  }
}

$("login-form").addEventListener("submit", (event) => {
  event.preventDefault(); $("login-error").textContent = "";
  login($("name").value.trim(), $("password").value);
});
$("create-form").addEventListener("submit", (event) => { event.preventDefault(); createTable(); });
$("bots-button").addEventListener("click", () => { $("private").checked = false; createTable(); });
$("variant").addEventListener("change", fillOptions);
$("chat-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = $("chat").value.trim(); if (!text) return;
  const reply = await checked(tableCmd(state.table, { type: "chat", text }));
  if (reply.ok) $("chat").value = "";
});
$("back").addEventListener("click", showLobby);
$("sort").addEventListener("click", () => {
  state.byRank = !state.byRank; state.order = []; $("sort").textContent = state.byRank ? "sort by suit" : "sort by rank"; renderHand();
});
setInterval(() => { if (state.deadline > 0) { renderTurn(); renderClaim(); } }, 1000);
$("replay-form").addEventListener("submit", (event) => { event.preventDefault(); openReplay($("replay-id").value.trim(), ""); });
setUpReplay(() => { if (state.client && state.table) { $("game").hidden = false; } else if (state.client) showLobby(); else $("login").hidden = false; });

const replayed = /^#replay=([^:&]+)(?::(.*))?$/.exec(location.hash);
if (replayed) openReplay(decodeURIComponent(replayed[1]), decodeURIComponent(replayed[2] || ""));

const joined = /^#join=([^:]+):(.*)$/.exec(location.hash);
if (joined) {
  localStorage.setItem("ramino.table", joined[1]); localStorage.setItem("ramino.invite", decodeURIComponent(joined[2]));
  history.replaceState(null, "", location.pathname);
}
const saved = JSON.parse(localStorage.getItem("ramino.login") || "null");
if (saved) { $("name").value = saved.name; $("password").value = saved.password; }
if (saved && localStorage.getItem("ramino.table")) login(saved.name, saved.password);

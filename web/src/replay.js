// The replay of a finished game, move by move: `GET /replay/TABLE?as=VIEWER&game=N` from the
// web listener (server/net/web.py), the rows `ramino replay` prints, each with the table after
// it. The server refuses a game that is not over, so nothing here can show a hidden card early.
import { cardText, isRed, meld } from "./cards.js";

const $ = (id) => document.getElementById(id);
const replay = { table: "", data: null, step: 0, viewer: "", game: "" };

function card(c) {
  const element = document.createElement("span");
  element.className = `card${c < 0 ? " back" : ""}${isRed(c) ? " red" : ""}`;
  element.textContent = c < 0 ? "▒▒" : cardText(c);
  element.setAttribute("aria-label", cardText(c, true));
  return element;
}

function cards(list, box) {
  const hidden = list.filter((c) => c < 0).length;
  for (const c of list) if (c >= 0) box.append(card(c));
  if (hidden) { const note = document.createElement("span"); note.className = "hidden-cards"; note.textContent = `${hidden} hidden`; box.append(note); }
}


export async function openReplay(table, viewer = "", game = "") {
  replay.table = table; replay.viewer = viewer; replay.game = game;
  for (const id of ["login", "lobby", "game"]) $(id).hidden = true;
  $("replay").hidden = false;
  $("replay-title").textContent = `Replay of table ${table}`;
  $("replay-error").textContent = "";
  const query = new URLSearchParams();
  if (viewer !== "") query.set("as", viewer);
  if (game !== "") query.set("game", game);
  let body;
  try {
    const response = await fetch(`replay/${encodeURIComponent(table)}?${query}`);
    body = await response.json();
    if (!response.ok) throw new Error(`${body.code}: ${body.message}`);
  } catch (error) {
    replay.data = null; $("replay-view").hidden = true;
    $("replay-error").textContent = `No replay: ${error.message}`;
    return;
  }
  replay.data = body; $("replay-view").hidden = false;
  fillChoices(body);
  const range = $("replay-range");
  range.max = String(body.steps.length - 1); range.value = "0";
  const log = $("replay-log"); log.textContent = "";
  body.steps.forEach((step, index) => {
    const item = document.createElement("li");
    item.textContent = step.text; item.dataset.seq = String(step.seq); item.dataset.type = step.type;
    item.addEventListener("click", () => show(index));
    log.append(item);
  });
  show(0);
}

function fillChoices(body) {
  const viewer = $("replay-viewer"); viewer.textContent = "";
  const choices = [["all", "Everyone (all hands)"], ...body.players.map((name, seat) => [String(seat), name])];
  for (const [value, label] of choices) {
    const option = document.createElement("option"); option.value = value; option.textContent = label; viewer.append(option);
  }
  viewer.value = String(body.viewer);
  const game = $("replay-game"); game.textContent = "";
  for (const number of body.games) {
    const option = document.createElement("option"); option.value = String(number); option.textContent = `Game ${number}`; game.append(option);
  }
  game.value = String(body.game);
  $("replay-game-label").hidden = body.games.length < 2;
}

export function show(index) {
  const data = replay.data; if (!data) return;
  const last = data.steps.length - 1;
  replay.step = Math.max(0, Math.min(last, index));
  const step = data.steps[replay.step];
  $("replay-range").value = String(replay.step);
  $("replay-range").setAttribute("aria-valuetext", `move ${replay.step + 1} of ${last + 1}: ${step.text}`);
  $("replay-position").textContent = `Move ${replay.step + 1} of ${last + 1}`;
  $("replay-move").textContent = step.text;
  const details = $("replay-details"); details.textContent = "";
  for (const line of step.details) { const item = document.createElement("li"); item.textContent = line; details.append(item); }
  $("replay-log").querySelectorAll("li").forEach((item, i) => {
    if (i === replay.step) { item.setAttribute("aria-current", "step"); item.scrollIntoView({ block: "nearest" }); }
    else item.removeAttribute("aria-current");
  });
  renderFrame(step.table, data);
}

function renderFrame(table, data) {
  const box = $("replay-table"); box.textContent = "";
  if (!table) return;
  table.hands.forEach((hand, seat) => {
    const row = document.createElement("div"); row.className = `replay-seat${table.to_move === seat ? " to-move" : ""}`;
    const name = document.createElement("strong");
    name.textContent = `${data.players[seat] || `seat ${seat}`} · ${table.scores[seat]} pts · ${hand.length} cards`;
    row.append(name, " ");
    const held = document.createElement("span"); held.className = "replay-hand"; cards(hand, held); row.append(held);
    box.append(row);
  });
  const middle = document.createElement("p"); middle.className = "replay-pile";
  middle.append(`Stock: ${table.stock_size} · Discard pile (${table.pile.length}): `);
  if (table.pile.length) for (const c of table.pile.slice(-6)) middle.append(card(c)); else middle.append("empty");
  box.append(middle);
  if (table.melds.length) {
    const melds = document.createElement("ol"); melds.className = "replay-melds";
    for (const spec of table.melds) { const item = document.createElement("li"); item.textContent = meld(spec); melds.append(item); }
    box.append(melds);
  }
}

function key(event) {
  if (!replay.data || $("replay").hidden) return;
  const target = event.target;
  if (target && (target.tagName === "SELECT" || target.id === "replay-range")) return;  // their own keys
  const moves = { ArrowRight: 1, ArrowLeft: -1, PageDown: 10, PageUp: -10 };
  if (event.key in moves) show(replay.step + moves[event.key]);
  else if (event.key === "Home") show(0);
  else if (event.key === "End") show(replay.data.steps.length - 1);
  else return;
  event.preventDefault();
}

export function setUpReplay(back) {
  $("replay-range").addEventListener("input", () => show(Number($("replay-range").value)));
  $("replay-first").addEventListener("click", () => show(0));
  $("replay-prev").addEventListener("click", () => show(replay.step - 1));
  $("replay-next").addEventListener("click", () => show(replay.step + 1));
  $("replay-last").addEventListener("click", () => show(replay.data ? replay.data.steps.length - 1 : 0));
  $("replay-viewer").addEventListener("change", () => openReplay(replay.table, $("replay-viewer").value, String(replay.data.game)));
  $("replay-game").addEventListener("change", () => openReplay(replay.table, $("replay-viewer").value, $("replay-game").value));
  $("replay-back").addEventListener("click", () => { $("replay").hidden = true; back(); });
  document.addEventListener("keydown", key);
}

// Cards as text (docs/protocol.md §5): card = copy << 6 | face; face = suit * 13 + rank - 1.
const SUITS = ["♣", "♦", "♥", "♠"];
const SUIT_NAMES = ["clubs", "diamonds", "hearts", "spades"];
const RANKS = ["A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"];
const RANK_NAMES = ["ace", "2", "3", "4", "5", "6", "7", "8", "9", "10", "jack", "queen", "king"];

export function cardText(card, long = false) {
  if (card < 0) return long ? "hidden card" : "??";
  const face = card & 63;
  if (face === 52) return long ? "joker" : "🃏 JK";
  const suit = Math.floor(face / 13); const rank = face % 13;
  return long ? `${RANK_NAMES[rank]} of ${SUIT_NAMES[suit]}` : `${RANKS[rank]}${SUITS[suit]}`;
}

export function isRed(card) {
  const face = card & 63;
  return card >= 0 && face < 52 && (Math.floor(face / 13) === 1 || Math.floor(face / 13) === 2);
}

const cards = (list) => list.map((c) => cardText(c)).join(" ");
const joker = (card) => card >= 0 && (card & 63) === 52;

// A meld as text, each joker with the card it stands for: `7♥ 8♥ 🃏 JK=9♥`.
export function meld(spec) {
  return spec.cards.map((c, i) => (joker(c) ? `${cardText(c)}=${cardText(spec.faces[i])}` : cardText(c))).join(" ");
}

export function describe(event, names) {
  const who = (seat) => names[seat] || `seat ${seat + 1}`;
  switch (event.type) {
    case "player_sat": return `${event.player} sat down`;
    case "player_stood": return `${event.player} stood up`;
    case "game_started": return `Game ${event.game} starts`;
    case "dealt": return `Hand ${event.hand} dealt`;
    case "drew": return `${who(event.seat)} drew ${event.card < 0 ? "from the stock" : cardText(event.card)}`;
    case "took_discard": return `${who(event.seat)} took ${cards(event.cards)}`;
    case "discarded": return `${who(event.seat)} discarded ${cardText(event.card)}`;
    case "knocked": return `${who(event.seat)} knocked with ${event.deadwood} deadwood${event.melds.length ? `, showing ${event.melds.map((m) => `[${meld(m)}]`).join(" ")}` : ""}`;
    case "melded": return `${who(event.seat)} melded ${event.melds.map(meld).join(" | ")}`;
    case "laid_off": return `${who(event.seat)} laid off ${cardText(event.card)}${joker(event.card) ? ` as ${cardText(event.face)}` : ""} on meld ${event.target + 1}`;
    case "upcard_passed": return `${who(event.seat)} passed on the upcard`;
    case "declined": return `${who(event.seat)} declined the upcard`;
    case "claim_window_opened": return `Claim window (${event.kind}) for ${event.seats.map(who).join(", ")}`;
    case "claim_answered": return event.count ? `${who(event.seat)} claims ${event.count}` : `${who(event.seat)} passes the claim`;
    case "claimed": return `${who(event.seat)} claimed ${cards(event.cards)}${event.stock_cards.length ? ` and ${event.stock_cards.length} from the stock` : ""}`;
    case "claim_window_closed": return "Claim window closed: nobody claimed";
    case "player_ready": return `${who(event.seat)} is ready for the next hand`;
    case "hand_ended": return `Hand ${event.hand} over (${event.reason}): ${event.points.join(" / ")}`;
    case "game_ended": return `Game over: ${event.winners.map(who).join(", ")} won`;
    default: return event.type.replaceAll("_", " ");
  }
}

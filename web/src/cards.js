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
    case "knocked": return `${who(event.seat)} knocked with ${event.deadwood} deadwood`;
    case "melded": return `${who(event.seat)} melded ${event.melds.map((m) => cards(m.cards)).join(" | ")}`;
    case "hand_ended": return `Hand ${event.hand} over (${event.reason}): ${event.points.join(" / ")}`;
    case "game_ended": return `Game over: ${event.winners.map(who).join(", ")} won`;
    default: return event.type.replaceAll("_", " ");
  }
}

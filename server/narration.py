"""Events as sentences a player understands, for demos, replays and logs."""

from __future__ import annotations

from collections.abc import Sequence

from protocol.game import format_spec
from server.engine import (
    ClaimAnswered,
    Claimed,
    ClaimWindowClosed,
    ClaimWindowOpened,
    Dealt,
    Declined,
    Discarded,
    Drew,
    Event,
    Floated,
    GameEnded,
    HandEnded,
    Knocked,
    LaidOff,
    Melded,
    MeldSpec,
    SeatForfeited,
    StockRebuilt,
    SwappedJoker,
    TookDiscard,
    UpcardPassed,
    format_card,
    format_cards,
)
from server.engine.views import HIDDEN

__all__ = ["describe_event", "describe_spec"]

_REASONS = {
    "out": "went out",
    "idle_cap": "no one went out (safety cap: too many turns without a lay-down)",
    "stock_exhausted": "no one went out (stock exhausted)",
    "wall": "the hand is void (the stock reached the wall)",
    "tie": "a tie: no one scores",
}
_KNOCK_REASONS = {
    "knock": "knocks",
    "gin": "goes gin",
    "big_gin": "goes big gin",
    "undercut": "undercuts the knocker",
}


describe_spec = format_spec


def _card(card: int) -> str:
    return "a card" if card == HIDDEN else format_card(card)


def describe_event(
    event: Event, names: Sequence[str] | None = None, table_melds: int | None = None
) -> str:
    """One line describing ``event``; ``names`` label the seats (default ``seat N``).

    ``table_melds``, the number of melds on the table before the event, lets new melds be
    numbered as lay-offs and joker swaps refer to them.
    """

    def who(seat: int) -> str:
        return names[seat] if names is not None else f"seat {seat}"

    match event:
        case Dealt(hand=hand, dealer=dealer, order=order):
            return f"hand {hand}: {who(dealer)} deals ({len(order)} cards)"
        case Drew(seat=seat, card=card):
            return f"{who(seat)} draws {_card(card)} from the stock"
        case TookDiscard(seat=seat, cards=cards):
            return f"{who(seat)} takes {format_cards(cards)} from the discard pile"
        case Melded(seat=seat, melds=melds):
            shown = ", ".join(
                f"[{describe_spec(spec)}]"
                + ("" if table_melds is None else f" (meld {table_melds + index})")
                for index, spec in enumerate(melds)
            )
            return f"{who(seat)} melds {shown}"
        case LaidOff(seat=seat, card=card, target=target, face=face):
            shown = describe_spec(MeldSpec((card,), (face,)))
            return f"{who(seat)} lays off {shown} on meld {target}"
        case SwappedJoker(seat=seat, card=card, target=target):
            return f"{who(seat)} puts {format_card(card)} in meld {target} and takes its joker"
        case Discarded(seat=seat, card=card):
            return f"{who(seat)} discards {format_card(card)}"
        case StockRebuilt(order=order, shuffled=shuffled):
            how = "shuffled into" if shuffled else "turned over to form"
            return f"the discard pile is {how} a new stock of {len(order)} cards"
        case Declined(seat=seat):
            return f"{who(seat)} passes with the stock exhausted: the hand ends"
        case SeatForfeited(seat=seat):
            return f"{who(seat)} has missed too many turns: the server plays for him"
        case UpcardPassed(seat=seat):
            return f"{who(seat)} passes the first upcard"
        case Knocked(seat=seat, card=card, melds=melds, deadwood=deadwood):
            discard = "without a discard" if card < 0 else f"discarding {format_card(card)}"
            shown = ", ".join(f"[{describe_spec(spec)}]" for spec in melds) or "no melds"
            return f"{who(seat)} knocks {discard}: {shown}, {deadwood} unmatched"
        case Floated(seat=seat):
            return f"{who(seat)} has laid down his last card and floats"
        case ClaimWindowOpened(kind=kind, seats=seats):
            call = '"Rummy!"' if kind == "rummy" else "bussare"
            return f"{call} may be called by {', '.join(who(seat) for seat in seats)}"
        case ClaimAnswered(seat=seat, count=count):
            return f"{who(seat)} {'claims' if count else 'passes'}"
        case Claimed(seat=seat, cards=cards, stock_cards=stock_cards):
            extra = f" and {len(stock_cards)} stock cards" if stock_cards else ""
            return f"{who(seat)} takes {format_cards(cards)} from the pile{extra}"
        case ClaimWindowClosed():
            return "no one claims"
        case HandEnded(
            hand=hand,
            winner=winner,
            ended_by=ended_by,
            reason=reason,
            rummy=rummy,
            points=points,
            counts=counts,
            shown=shown,
            laid_off=laid_off,
        ):
            if reason == "undercut":
                head = f"{who(winner)} {_KNOCK_REASONS[reason]}"
            elif ended_by >= 0 and reason in _KNOCK_REASONS:
                head = f"{who(ended_by)} {_KNOCK_REASONS[reason]}"
            elif ended_by >= 0 and reason == "out":
                head = f"{who(ended_by)} {_REASONS['out']}" + (" (rummy!)" if rummy else "")
            else:
                head = _REASONS.get(reason, reason)
            if winner >= 0 and (winner != ended_by or reason == "knock"):
                head += f"; {who(winner)} wins the hand"
            # Knock and Gin Rummy: what the others showed against the knock (the knocker's
            # melds were in the knock's own line).
            for seat, melds in enumerate(shown):
                if seat != ended_by:
                    spread = ", ".join(f"[{describe_spec(spec)}]" for spec in melds) or "no melds"
                    head += f"; {who(seat)} shows {spread}"
                    if laid_off:
                        head += f", lays off {format_cards(laid_off)}"
                    head += f", {counts[seat]} unmatched"
            scored = ", ".join(f"{who(seat)} {point}" for seat, point in enumerate(points))
            return f"hand {hand} over: {head}; points: {scored}"
        case GameEnded(winners=winners, totals=totals):
            board = ", ".join(f"{who(seat)} {total}" for seat, total in enumerate(totals))
            won = " and ".join(who(seat) for seat in winners)
            return f"game over: {won} won; final totals: {board}"
    return repr(event)  # pragma: no cover

// The answer box's content (POST /answer): the answer with each [n] a button opening its passage,
// the cited passages listed, and the stand-in's label when one wrote it. Loaded on the first Ask.
// streamAnswer asks over the live channel and shows the text as the model writes it.

import { el } from "./format.js";

const STREAM_TIMEOUT_MS = 60_000;

/** Fills ``view``'s answer box: streamed over the live channel when it is open, else POST /answer. */
export async function showAnswer(view, query, mode, filter, where) {
  const box = view.elements.answer;
  if (!box) return;
  box.hidden = false;
  box.setAttribute("aria-busy", "true");
  box.replaceChildren(el("p", { className: "muted" }, "Answering…"));
  try {
    const request = filter ? { query, mode, k: 5, filter } : { query, mode, k: 5 };
    let answer = await streamAnswer(view, request, box);
    if (!answer) {
      view.answers.posted += 1;
      answer = await view.api.answer(query, mode, 5, filter);
    }
    box.replaceChildren(...renderAnswer(answer, (passage) => view.open(passage), where));
  } catch (error) {
    box.replaceChildren(el("p", { className: "field-error" }, `No answer: ${error.message}`));
  } finally {
    box.removeAttribute("aria-busy");
  }
}

/**
 * Asks for ``request`` over the live channel (``view.send``) and writes the text into ``box`` as it
 * streams; resolves with the answer, or null when the channel is not open (ask over HTTP instead).
 * ``view.streams`` routes the channel's events here by request id.
 */
export function streamAnswer(view, request, box) {
  const id = `answer-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  return new Promise((resolve, reject) => {
    let text = "";
    const body = el("p", { className: "answer-text streaming", "aria-live": "polite" });
    const finish = (answer, error) => {
      clearTimeout(timer);
      view.streams.delete(id);
      if (error) reject(error);
      else resolve(answer);
    };
    const timer = setTimeout(() => finish(null, new Error("the answer stopped arriving")), STREAM_TIMEOUT_MS);
    view.streams.set(id, (event) => {
      if (event.type === "answer.delta") {
        if (!text) box.replaceChildren(el("h3", {}, "Answer"), body);
        text += event.text;
        body.textContent = text;
        view.answers.deltas += 1;
      } else if (event.type === "answer.completed") {
        view.answers.streamed += 1;
        finish(event.answer);
      } else if (event.type === "answer.failed") {
        finish(null, new Error(event.error?.message || "the answer failed"));
      }
    });
    if (!view.send({ action: "answer", request_id: id, request })) finish(null);
  });
}

/** Where a citation opens: an expanded passage (a section, a page) at its matched chunks' pages. */
export function matchedSpot(passage) {
  const pages = (passage.boxes || []).map((box) => Number(box.page)).filter(Number.isFinite);
  if (!passage.expanded || passage.expanded === "none" || !pages.length) return passage;
  return { ...passage, page_start: Math.min(...pages), page_end: Math.max(...pages) };
}

/** The box's children for ``answer``; ``open`` opens a passage, ``where`` says where it stands. */
export function renderAnswer(answer, open, where) {
  const cited = new Map((answer.citations || []).map((citation) => [citation.number, citation.passage]));
  const source = (passage) => `${passage.filename || passage.document_id}, ${where(passage)}`;
  const body = el("p", { className: answer.supported ? "answer-text" : "answer-text muted" });
  let last = 0;
  for (const match of String(answer.answer).matchAll(/\[(\d{1,3})\]/g)) {
    body.append(answer.answer.slice(last, match.index));
    const passage = cited.get(Number(match[1]));
    body.append(
      passage
        ? el("button", {
            type: "button",
            className: "link citation",
            textContent: match[0],
            title: source(passage),
            "aria-label": `Source ${match[1]}: ${source(passage)}`,
            onclick: () => open(matchedSpot(passage)),
          })
        : match[0],
    );
    last = match.index + match[0].length;
  }
  body.append(answer.answer.slice(last));
  const sources = [...cited].map(([number, passage]) =>
    el("li", {}, el("button", {
      type: "button",
      className: "link open-document",
      textContent: `[${number}] ${source(passage)}`,
      onclick: () => open(matchedSpot(passage)),
    })),
  );
  return [
    el("h3", {}, "Answer"),
    body,
    sources.length ? el("ol", { className: "answer-sources", "aria-label": "Cited passages" }, ...sources) : null,
    answer.stand_in ? el("p", { className: "muted stand-in" }, `Answered by the local ${answer.stand_in}.`) : null,
  ].filter(Boolean);
}

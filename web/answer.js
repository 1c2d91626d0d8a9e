// The answer box's content (POST /answer): the answer with each [n] a button opening its passage,
// the cited passages listed, and the stand-in's label when one wrote it. Loaded on the first Ask.

import { el } from "./format.js";

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

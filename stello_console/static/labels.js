// A session's label as the gateway takes it (stello/validation.py `label`): 1..200
// characters, one line. The gateway counts characters as code points (Python's len), while
// an input's maxlength counts UTF-16 code units, two for an emoji or any character beyond
// the Basic Multilingual Plane: maxlength="200" cut a label of 150 emoji to 100. So the
// label fields have no maxlength; a dialog checks the length as the gateway does, before
// it sends, and says so in the gateway's words.

import { ApiError } from "./api.js";

// The most characters (code points) a label has.
export const LABEL_MAX = 200;

/**
 * Throw the gateway's INVALID_ARGUMENT when `label` is longer than a label may be (the
 * gateway judges the rest: empty, control characters).
 * @param {FormDataEntryValue | null} label
 */
export function checkLabel(label) {
  const length = Array.from(typeof label === "string" ? label : "").length;
  if (length > LABEL_MAX) throw new ApiError("INVALID_ARGUMENT", `label: must be at most ${LABEL_MAX} characters, got ${length}`);
}

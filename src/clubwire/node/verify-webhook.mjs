import { createHmac, timingSafeEqual } from "node:crypto";

export class WebhookVerificationError extends Error {}

// Returns the signed timestamp, or throws WebhookVerificationError.
// rawBody: the request body exactly as received, as a Buffer (never re-serialised JSON).
export function verifyWebhook(rawBody, header, secret, { toleranceSeconds = 300, now = Date.now() / 1000 } = {}) {
  if (!Buffer.isBuffer(rawBody)) throw new TypeError("rawBody must be the raw request body as a Buffer");
  const timestamps = [];
  const signatures = [];
  for (const item of String(header ?? "").split(",")) {
    const [key, value = ""] = item.trim().split("=");
    if (key === "t") timestamps.push(value);
    if (key === "v1") signatures.push(value); // there may be several; other schemes are ignored
  }
  if (timestamps.length !== 1 || !/^[0-9]{1,20}$/.test(timestamps[0]) || signatures.length === 0) {
    throw new WebhookVerificationError("malformed X-Service-Signature header");
  }
  const t = Number(timestamps[0]);
  const expected = createHmac("sha256", secret).update(`${timestamps[0]}.`).update(rawBody).digest();
  const matches = signatures.some((candidate) => {
    const given = Buffer.from(candidate, "hex");
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!matches) throw new WebhookVerificationError("no v1 signature matches the body and secret");
  if (!(Math.abs(now - t) <= toleranceSeconds)) {
    throw new WebhookVerificationError(`timestamp ${t} is more than ${toleranceSeconds} s from now`);
  }
  return t;
}

import { readFileSync } from "node:fs";
import { verifyWebhook } from "./verify-webhook.mjs";

const folder = process.argv[2] ?? ".clubwire/demo/last-delivery";
const body = readFileSync(`${folder}/body.json`); // the exact bytes, as a Buffer
const header = readFileSync(`${folder}/signature.txt`, "utf8").trim();
const signedAt = verifyWebhook(body, header, process.env.WEBHOOK_SECRET);
const event = JSON.parse(body);
console.log(`verified ${event.event} ${event.id}, signed at ${new Date(signedAt * 1000).toISOString()}`);

/**
 * A server written in the tests that answers every chat completion fluently and wrong (a number off
 * by one, another capital, JSON with other keys), streams with usage, counts its tokens right: what
 * a wrong chat template or a broken quantization looks like to a gate that only checks an answer came.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";

export async function fluentlyWrong(): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (c: Buffer) => (raw += c.toString()));
    req.on("end", () => {
      if (req.url === "/v1/models") {
        res.writeHead(200, { "content-type": "application/json" }).end('{"object":"list","data":[{"id":"m"}]}');
        return;
      }
      const body = JSON.parse(raw) as { stream?: boolean; messages: { content: string }[] };
      const prompt = body.messages.at(-1)!.content;
      const content = /JSON/.test(prompt) ? '{"answer": "sure"}' : /\d/.test(prompt) ? "The answer is 41." : "London.";
      const usage = { prompt_tokens: 12, completion_tokens: content.split(" ").length, total_tokens: 0 };
      if (!body.stream) {
        const choices = [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }];
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ choices, usage }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      const chunk = (o: unknown) => res.write(`data: ${JSON.stringify(o)}\n\n`);
      chunk({ choices: [{ index: 0, delta: { content }, finish_reason: null }] });
      chunk({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] });
      chunk({ choices: [], usage });
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, close: () => new Promise((r) => server.close(() => r())) };
}

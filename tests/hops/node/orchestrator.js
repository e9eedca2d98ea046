// An orchestrator written in Node.js, instrumented the standard way with OpenTelemetry JS
// (sdk-node, instrumentation-http, W3C propagation), without llmtrace: the service between two
// llmtrace services in tests/hops. POST /answer spends POLICY_MS on its own work (a policy
// check), then POSTs the body to RAG_URL and answers with what came back.
//
// Environment: PORT, RAG_URL, POLICY_MS, OTEL_SERVICE_NAME, and OTLP_TRACES_URL (OTLP/HTTP JSON,
// a Collector's /v1/traces or the test's file sink).
'use strict';

const { NodeSDK } = require('@opentelemetry/sdk-node');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http');
const { SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');

const sdk = new NodeSDK({
  spanProcessors: [
    new SimpleSpanProcessor(new OTLPTraceExporter({ url: process.env.OTLP_TRACES_URL })),
  ],
  instrumentations: [new HttpInstrumentation()],
});
sdk.start();

// required after the SDK started, so that instrumentation-http patches it
const http = require('node:http');

const policyMs = Number(process.env.POLICY_MS || '0');
const ragUrl = new URL(process.env.RAG_URL);

function forward(body, respond) {
  const request = http.request(
    ragUrl,
    { method: 'POST', headers: { 'content-type': 'application/json' } },
    (response) => {
      const chunks = [];
      response.on('data', (chunk) => chunks.push(chunk));
      response.on('end', () => respond(response.statusCode, Buffer.concat(chunks)));
    },
  );
  request.on('error', (error) => respond(502, Buffer.from(String(error))));
  request.end(body);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    // the service's own work, which no llmtrace span claims
    setTimeout(() => {
      forward(Buffer.concat(chunks), (status, body) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(body);
      });
    }, policyMs);
  });
});

server.listen(Number(process.env.PORT), '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});

function stop() {
  server.close();
  sdk.shutdown().finally(() => process.exit(0));
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

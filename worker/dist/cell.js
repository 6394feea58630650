// worker/cell_bootstrap.ts
import process from "node:process";
import { setImmediate as setHostImmediate2 } from "node:timers";
import v82 from "node:v8";
import { parentPort, receiveMessageOnPort } from "node:worker_threads";

// proto/bytes.ts
import { Buffer } from "node:buffer";
var MIB = 1048576;
var MAX_INT32 = 2147483647;
var MAX_MESSAGE_BYTES = 67108864;
function varintBytes(n) {
  let bytes = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    bytes++;
  }
  return bytes;
}
function fieldBytes(n) {
  return 1 + varintBytes(n) + n;
}
function utf8ByteLength(s) {
  if (s.length < REMEMBER_FROM) return Buffer.byteLength(s, "utf8");
  if (s === remembered.text) return remembered.bytes;
  const bytes = Buffer.byteLength(s, "utf8");
  remembered = {
    text: s,
    bytes
  };
  return bytes;
}
var REMEMBER_FROM = 4096;
var remembered = {
  text: "",
  bytes: 0
};
function isLow(c) {
  return c >= 56320 && c <= 57343;
}
function utf8CharAt(s, i) {
  const c = s.charCodeAt(i);
  if (c < 128) return [
    1,
    1
  ];
  if (c < 2048) return [
    2,
    1
  ];
  if (c >= 55296 && c <= 56319 && isLow(s.charCodeAt(i + 1))) return [
    4,
    2
  ];
  return [
    3,
    1
  ];
}
function charBefore(s, end) {
  const c = s.charCodeAt(end - 1);
  if (c < 128) return [
    1,
    1
  ];
  if (c < 2048) return [
    2,
    1
  ];
  if (isLow(c) && end >= 2) {
    const h = s.charCodeAt(end - 2);
    if (h >= 55296 && h <= 56319) return [
      4,
      2
    ];
  }
  return [
    3,
    1
  ];
}
function utf8Prefix(s, maxBytes) {
  let units = 0;
  let bytes = 0;
  while (units < s.length) {
    const [b, u] = utf8CharAt(s, units);
    if (bytes + b > maxBytes) break;
    bytes += b;
    units += u;
  }
  return {
    units,
    bytes
  };
}
function utf8Suffix(s, maxBytes) {
  let units = 0;
  let bytes = 0;
  while (units < s.length) {
    const [b, u] = charBefore(s, s.length - units);
    if (bytes + b > maxBytes) break;
    bytes += b;
    units += u;
  }
  return {
    units,
    bytes
  };
}
var JSON_ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;
function jsonEscapeExtraBytes(s) {
  const first = s.search(JSON_ESCAPED);
  if (first < 0) return 0;
  let extra = 0;
  for (let i = first; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 32 && c !== 34 && c !== 92 && (c < 55296 || c > 57343)) continue;
    if (c === 34 || c === 92 || c === 8 || c === 9 || c === 10 || c === 12 || c === 13) {
      extra += 1;
    } else if (c < 32) extra += 5;
    else if (c <= 56319 && i + 1 < s.length && isLow(s.charCodeAt(i + 1))) i++;
    else extra += 3;
  }
  return extra;
}

// proto/frame_codec.ts
var MAX_HEADER_LENGTH = 4294967295;
var HEADER_BYTES = 4;
var FrameError = class extends Error {
  /** What was violated, lower-case and specific; the same text as `message`. */
  detail;
  /**
   * Creates a framing error.
   *
   * @param detail what was violated, e.g. `frame length 70000000 exceeds 68157440 bytes`
   * @param options the standard error options (`cause`)
   */
  constructor(detail, options) {
    super(detail, options);
    this.name = "FrameError";
    this.detail = detail;
  }
};
function checkMaxFrameBytes(maxFrameBytes) {
  if (!Number.isInteger(maxFrameBytes) || maxFrameBytes < 0 || maxFrameBytes > MAX_HEADER_LENGTH) {
    throw new RangeError(`maxFrameBytes must be an integer from 0 to ${MAX_HEADER_LENGTH}, got ${maxFrameBytes}`);
  }
}
function oversize(length, maxFrameBytes) {
  return new FrameError(`frame length ${length} exceeds ${maxFrameBytes} bytes`);
}
var FRAME_HEADER_BYTES = HEADER_BYTES;
function writeFrameHeader(out, pos, length, maxFrameBytes) {
  checkMaxFrameBytes(maxFrameBytes);
  if (length > maxFrameBytes) throw oversize(length, maxFrameBytes);
  out[pos] = length >>> 24;
  out[pos + 1] = length >>> 16 & 255;
  out[pos + 2] = length >>> 8 & 255;
  out[pos + 3] = length & 255;
  return pos + HEADER_BYTES;
}

// worker/cell_protocol.ts
var CREDIT_EVENTS = 0;
var CREDIT_BYTES = 1;
var CREDIT_GENERATION = 2;
var CREDIT_STOP = 3;
var CELL_DOORBELL = 4;
var CREDIT_ACKED = 5;
var CELL_PROGRESS = 6;
var CELL_RESULT = 7;
var CELL_STOPPED = 8;
var CELL_BUSY = 9;
var CELL_BUSY_REPORTED = 10;
var CELL_WORDS = 11;
var SINK_LOCK = 0;
var RETIRE_HEAP_SHARE = 0.5;
var RETIRE_HEAP_BYTES = 64 * 1024 * 1024;
var PARK_MS = 1e3;

// proto/store_batches.ts
var STORE_BATCH_UNITS = 65536;
function storeBatchEnd(entries, from, maxUnits = STORE_BATCH_UNITS) {
  let units = 0;
  let end = from;
  while (end < entries.length && (end === from || units < maxUnits)) {
    const [key, value] = entries[end++];
    units += key.length + value.length;
  }
  return end;
}

// worker/cell_events.ts
var LINE_END = 10;
var DEFAULT_MAX_FRAME_BYTES = MAX_MESSAGE_BYTES + MIB;
function wireCellEvents(cellId, output) {
  switch (output.t) {
    case "started":
      return [
        {
          cellId,
          started: {}
        }
      ];
    case "text":
      return [
        {
          cellId,
          contentItem: {
            text: output.text
          }
        }
      ];
    case "trimmedText":
      return [
        {
          cellId,
          contentItem: {
            trimmedText: wireTrimmed(output.text)
          }
        }
      ];
    case "image":
      return [
        {
          cellId,
          contentItem: {
            image: {
              imageUrl: output.image.url,
              detail: output.image.detail
            }
          }
        }
      ];
    case "droppedImage":
      return [
        {
          cellId,
          contentItem: {
            droppedMedia: {
              kind: "image",
              bytes: output.bytes,
              detail: output.detail,
              ...output.jsonExtra ? {
                jsonExtraBytes: output.jsonExtra
              } : {}
            }
          }
        }
      ];
    case "audio":
      return [
        {
          cellId,
          contentItem: {
            audioUrl: output.url
          }
        }
      ];
    case "droppedAudio":
      return [
        {
          cellId,
          contentItem: {
            droppedMedia: {
              kind: "audio",
              bytes: output.bytes,
              ...output.jsonExtra ? {
                jsonExtraBytes: output.jsonExtra
              } : {}
            }
          }
        }
      ];
    case "yield":
      return [
        {
          cellId,
          yieldRequested: {}
        }
      ];
    case "toolCall":
      return [
        {
          cellId,
          toolCall: output.input === void 0 ? {
            runtimeToolCallId: output.id,
            globalName: output.name
          } : {
            runtimeToolCallId: output.id,
            globalName: output.name,
            inputJson: output.input
          }
        }
      ];
    case "toolResultConsumed":
      return [
        {
          cellId,
          toolResultConsumed: output.id
        }
      ];
    case "notify":
      return [
        {
          cellId,
          notify: output.text
        }
      ];
    case "result": {
      const events = [];
      const writes = output.writes;
      for (let from = 0; from < writes.length; ) {
        const end = storeBatchEnd(writes, from);
        events.push(storedWritesEvent(cellId, writes, from, end));
        from = end;
      }
      events.push({
        cellId,
        result: output.trimmedError ? {
          trimmedError: wireTrimmed(output.trimmedError)
        } : output.error === void 0 ? {} : {
          errorText: output.error
        }
      });
      return events;
    }
    case "storedWrites":
      return [
        storedWritesEvent(cellId, output.writes, 0, output.writes.length)
      ];
    case "idle":
      return [
        {
          cellId,
          idle: output.stretch >>> 0
        }
      ];
    case "stopped":
    case "pong":
      return [];
  }
}
function encodeCellFrames(cellId, outputs, maxFrameBytes, scratch) {
  const messages = [];
  for (const output of outputs) {
    for (const event of wireCellEvents(cellId, output)) {
      messages.push([
        [
          2,
          eventFields(event)
        ],
        LINE_END_FIELD
      ]);
    }
    if (output.t === "result") {
      messages.push([
        [
          2,
          eventFields({
            cellId,
            exited: {
              reason: "normal"
            }
          })
        ],
        LINE_END_FIELD
      ]);
    }
  }
  return encodeMessages(messages, maxFrameBytes, scratch);
}
function encodeStoredWrites(cellId, writes, from, end, maxFrameBytes, scratch) {
  const event = storedWritesEvent(cellId, writes, from, end);
  return encodeMessages([
    [
      [
        2,
        eventFields(event)
      ],
      LINE_END_FIELD
    ]
  ], maxFrameBytes, scratch);
}
function storedWritesEvent(cellId, writes, from, end) {
  const entries = [];
  for (let i = from; i < end; i++) entries.push({
    key: writes[i][0],
    valueJson: writes[i][1]
  });
  return {
    cellId,
    storedWrites: {
      entries
    }
  };
}
function encodeMessages(messages, maxFrameBytes, scratch) {
  const plans = messages.map(plan);
  let total = 0;
  for (const { size } of plans) total += FRAME_HEADER_BYTES + size;
  const out = scratch ? scratch.take(total) : new Uint8Array(total);
  let pos = 0;
  messages.forEach((fields, i) => {
    const { size, lengths } = plans[i];
    pos = writeFrameHeader(out, pos, size, maxFrameBytes);
    pos = writeFields(out, pos, fields, lengths, {
      at: 0
    });
  });
  return out;
}
var KEEP_SCRATCH_BYTES = MIB;
var FrameScratch = class {
  #buffer = new Uint8Array(4096);
  /**
   * A view of `bytes` bytes, valid until the next call.
   *
   * @param bytes the size needed
   * @returns the view (a fresh buffer when it is over the size kept)
   */
  take(bytes) {
    if (bytes > this.#buffer.length) {
      const size = Math.max(bytes, this.#buffer.length * 2);
      if (size > KEEP_SCRATCH_BYTES) return new Uint8Array(bytes);
      this.#buffer = new Uint8Array(size);
    }
    return this.#buffer.subarray(0, bytes);
  }
};
var utf8 = new TextEncoder();
var LINE_END_FIELD = [
  15,
  LINE_END
];
function eventFields(event) {
  const fields = [
    [
      1,
      event.cellId
    ]
  ];
  if (event.started) fields.push([
    2,
    []
  ]);
  else if (event.contentItem) fields.push([
    3,
    itemFields(event.contentItem)
  ]);
  else if (event.yieldRequested) fields.push([
    4,
    []
  ]);
  else if (event.toolCall) {
    const call = [
      [
        1,
        event.toolCall.runtimeToolCallId
      ],
      [
        2,
        event.toolCall.globalName
      ]
    ];
    if (event.toolCall.inputJson !== void 0) call.push([
      3,
      event.toolCall.inputJson
    ]);
    fields.push([
      5,
      call
    ]);
  } else if (event.toolResultConsumed !== void 0) fields.push([
    6,
    event.toolResultConsumed
  ]);
  else if (event.notify !== void 0) fields.push([
    7,
    event.notify
  ]);
  else if (event.storedWrite) {
    fields.push([
      9,
      [
        [
          1,
          event.storedWrite.key
        ],
        [
          2,
          event.storedWrite.valueJson
        ]
      ]
    ]);
  } else if (event.storedWrites) {
    fields.push([
      12,
      event.storedWrites.entries.map((e) => [
        1,
        [
          [
            1,
            e.key
          ],
          [
            2,
            e.valueJson
          ]
        ]
      ])
    ]);
  } else if (event.result) {
    const { errorText, trimmedError } = event.result;
    fields.push([
      10,
      trimmedError ? [
        [
          2,
          trimmedFields(trimmedError)
        ]
      ] : errorText !== void 0 ? [
        [
          1,
          errorText
        ]
      ] : []
    ]);
  } else if (event.exited) fields.push([
    11,
    [
      [
        1,
        event.exited.reason
      ]
    ]
  ]);
  else if (event.idle !== void 0) fields.push([
    14,
    event.idle
  ]);
  return fields;
}
function wireTrimmed(text) {
  const { head, tail, total, jsonExtra } = text;
  return jsonExtra ? {
    head,
    tail,
    totalBytes: total,
    jsonExtraBytes: jsonExtra
  } : {
    head,
    tail,
    totalBytes: total
  };
}
function trimmedFields(text) {
  const fields = [
    [
      1,
      text.head
    ],
    [
      2,
      text.tail
    ],
    [
      3,
      text.totalBytes
    ]
  ];
  if (text.jsonExtraBytes) fields.push([
    4,
    text.jsonExtraBytes
  ]);
  return fields;
}
function itemFields(item) {
  if ("text" in item) return [
    [
      1,
      item.text
    ]
  ];
  if ("image" in item) return [
    [
      2,
      [
        [
          1,
          item.image.imageUrl
        ],
        [
          2,
          item.image.detail
        ]
      ]
    ]
  ];
  if ("trimmedText" in item) return [
    [
      4,
      trimmedFields(item.trimmedText)
    ]
  ];
  if ("droppedMedia" in item) {
    const { kind, bytes, detail, jsonExtraBytes } = item.droppedMedia;
    const media = [
      [
        1,
        kind
      ],
      [
        2,
        bytes
      ]
    ];
    if (detail !== void 0) media.push([
      3,
      detail
    ]);
    if (jsonExtraBytes) media.push([
      4,
      jsonExtraBytes
    ]);
    return [
      [
        5,
        media
      ]
    ];
  }
  return [
    [
      3,
      item.audioUrl
    ]
  ];
}
function plan(fields) {
  const lengths = [];
  return {
    size: measure(fields, lengths),
    lengths
  };
}
function measure(fields, lengths) {
  let size = 0;
  for (const [, value] of fields) {
    if (typeof value === "number") {
      size += 1 + varintBytes(value);
      continue;
    }
    let length;
    if (typeof value === "string") {
      length = utf8ByteLength(value);
      lengths.push(length);
    } else {
      const at = lengths.length;
      lengths.push(0);
      length = lengths[at] = measure(value, lengths);
    }
    size += fieldBytes(length);
  }
  return size;
}
function writeVarint(out, pos, value) {
  while (value >= 128) {
    out[pos++] = value % 128 | 128;
    value = Math.floor(value / 128);
  }
  out[pos++] = value;
  return pos;
}
function writeFields(out, pos, fields, lengths, next) {
  for (const [no, value] of fields) {
    if (typeof value === "number") {
      out[pos++] = no << 3;
      pos = writeVarint(out, pos, value);
      continue;
    }
    const length = lengths[next.at++];
    out[pos++] = no << 3 | 2;
    pos = writeVarint(out, pos, length);
    if (typeof value !== "string") {
      pos = writeFields(out, pos, value, lengths, next);
    } else if (length === value.length && length <= 32) {
      for (let i = 0; i < length; i++) out[pos++] = value.charCodeAt(i);
    } else {
      utf8.encodeInto(value, out.subarray(pos, pos + length));
      pos += length;
    }
  }
  return pos;
}
var LOCK_WAIT_MS = 20;
function writeLocked(sink, id, bytes, write = writeAllSync) {
  for (; ; ) {
    const holder = Atomics.compareExchange(sink, SINK_LOCK, 0, id);
    if (holder === 0 || holder === id) break;
    Atomics.wait(sink, SINK_LOCK, holder, LOCK_WAIT_MS);
  }
  try {
    write(bytes);
  } finally {
    if (Atomics.compareExchange(sink, SINK_LOCK, id, 0) === id) {
      try {
        Atomics.notify(sink, SINK_LOCK);
      } catch {
      }
    }
  }
}
function writeAllSync(bytes) {
  const length = bytes.length;
  let offset = Deno.stdout.writeSync(bytes);
  while (offset < length) offset += Deno.stdout.writeSync(bytes.subarray(offset));
}

// worker/cell_rehearsal.ts
import { MessageChannel } from "node:worker_threads";

// worker/cell_run.ts
import { clearTimeout as clearHostTimer, setImmediate as setHostImmediate, setTimeout as setHostTimer } from "node:timers";

// worker/cell_module.ts
import vm from "node:vm";

// proto/cell_source.ts
var CELL_FILE_NAME = "exec_main.mjs";

// worker/cell_module.ts
var SourceTextModule = vm.SourceTextModule;
var DYNAMIC_IMPORT_ERROR = "unsupported import in exec";
var refused = false;
function refuseImport() {
  refused = true;
  return Promise.reject(DYNAMIC_IMPORT_ERROR);
}
function importRefused() {
  return refused;
}
function forgetRefusedImport() {
  refused = false;
}
function compileCellModule(source, context) {
  return new SourceTextModule(source, {
    context,
    identifier: CELL_FILE_NAME,
    importModuleDynamically: refuseImport
  });
}
function warmUpModules(context) {
  const module = new SourceTextModule("", {
    context,
    identifier: CELL_FILE_NAME
  });
  module.linkRequests([]);
  module.instantiate();
  void module.evaluate();
}
function disposeCellModule(module) {
  for (const key of Reflect.ownKeys(module)) Reflect.deleteProperty(module, key);
}
function describeCompileError(error) {
  if (error !== null && typeof error === "object") {
    const { name, message } = error;
    if (typeof name === "string" && typeof message === "string") return `${name}: ${message}`;
  }
  return String(error);
}

// worker/cell_helpers.ts
var PHASE_RUNNING = 0;
var PHASE_STOPPED = 1;
var PHASE_FINISHED = 2;
var EMIT_TEXT = 0;
var EMIT_IMAGE = 1;
var EMIT_YIELD = 2;
var EMIT_NOTIFY = 3;
var EMIT_CONSUMED = 4;
var EMIT_AUDIO = 5;
var STORE_OK = 0;
var STORE_OVER_LIMIT = 1;
var TIMER_SET = 0;
var TIMER_CLEAR = 1;
var FINISH_FAILED = 1;
var FINISH_EXIT = 2;

// worker/cell_outbox.ts
var FRAMES = new FrameScratch();
var WRITTEN_RESULT = {
  t: "result",
  w: true
};
var CellOutbox = class {
  #owner;
  #cellId = "";
  #output;
  /** Writes frames to the runtime's stream; unset for a cell that posts its outputs whole. */
  #write;
  /** The largest frame this cell writes (the host's `maxWorkerFrameBytes`). */
  #maxFrameBytes = DEFAULT_MAX_FRAME_BYTES;
  #credit;
  /** Payload bytes of the counted outputs not yet acknowledged, oldest first from `#unackedHead`. */
  #unacked = [];
  #unackedHead = 0;
  #unackedBytes = 0;
  /** `CREDIT_ACKED` as last settled. */
  #ackedSeen = 0;
  /** `started` leaves with the cell's first output (one message, one frame write): see `post`. */
  #startedPending = false;
  /**
   * A posted output's credit wait was cut short by a stack overflow: the next output waits first.
   * A field, not a method: it is set where the stack is exhausted, and a call might overflow it.
   */
  owesWait = false;
  /**
   * The result, until it has been sent (the cell run's end may run short of stack). A field, not a
   * method, for the same reason as {@link CellOutbox.owesWait}.
   */
  unsentResult;
  /** The result's frames are written but the runtime has not been told yet. */
  #noticeOwed = false;
  /** How many of the result's stored writes are written already (a retried result goes on from there). */
  #writesSent = 0;
  /** @param owner the cell run whose phase decides whether a credit wait goes on */
  constructor(owner) {
    this.#owner = owner;
  }
  /** Routes the cell run's outputs. */
  open(route) {
    this.#cellId = route.cellId;
    this.#maxFrameBytes = route.maxFrameBytes;
    this.#output = route.output;
    this.#write = route.write;
    this.#credit = route.credit;
  }
  /** From here `started` leaves with the cell's first output (one message, one frame write). */
  holdStarted() {
    this.#startedPending = true;
  }
  /** Sends `started` unless it left with an output already (a cell running without output yet). */
  sendStartedIfPending() {
    if (this.#startedPending) {
      this.#startedPending = false;
      this.post({
        t: "started"
      });
    }
  }
  /** Whether the result is still to be sent, or the runtime still to be told of it. */
  get resultOwed() {
    return this.unsentResult !== void 0 || this.#noticeOwed;
  }
  /** Sends {@link CellOutbox.unsentResult} and the note of a written one (retried if out of stack). */
  sendOwedResult() {
    const result = this.unsentResult;
    if (result !== void 0) {
      this.post(result);
      this.unsentResult = void 0;
    }
    if (this.#noticeOwed) this.#sendNotice();
  }
  /** The reduced form of a text over the trimming threshold, else undefined. */
  trim(text) {
    const credit = this.#credit;
    if (text.length * 3 <= credit.trimTextOver) return void 0;
    const total = utf8ByteLength(text);
    if (total <= credit.trimTextOver) return void 0;
    const head = text.slice(0, utf8Prefix(text, credit.keepTextBytes).units);
    const tail = text.slice(text.length - utf8Suffix(text, credit.keepTextBytes).units);
    return {
      head,
      tail,
      total,
      jsonExtra: this.jsonExtra(text)
    };
  }
  /** What JSON escaping adds to a text sent in reduced form, when the session's door writes JSON. */
  jsonExtra(text) {
    return this.#credit.jsonSizes ? jsonEscapeExtraBytes(text) : 0;
  }
  /** A text item, reduced when over the trimming threshold. */
  postText(text) {
    const trimmed = this.trim(text);
    if (trimmed === void 0) return this.postCounted({
      t: "text",
      text,
      n: utf8ByteLength(text)
    });
    this.postCounted({
      t: "trimmedText",
      text: trimmed,
      n: utf8ByteLength(trimmed.head) + utf8ByteLength(trimmed.tail)
    });
  }
  /**
   * Counts and posts an output. A helper call may run with almost no stack left (a cell at stack
   * exhaustion), where any call, even of a built-in, can throw a stack overflow: the output is
   * counted first and the count undone if the post throws (with the same built-ins at the same
   * depth, which cannot overflow there: they just ran), so it is either sent and counted or
   * neither, and the helper call throws only in the second case.
   */
  postCounted(message) {
    const words = this.#credit.words;
    if (this.#credit.maxEvents === Infinity) {
      Atomics.add(words, CREDIT_EVENTS, 1);
      try {
        this.post(message);
      } catch (e) {
        Atomics.add(words, CREDIT_EVENTS, -1);
        throw e;
      }
      return;
    }
    if (this.owesWait) {
      if (!this.awaitCredit()) return;
      this.owesWait = false;
    }
    this.#settleCredit();
    const unacked = this.#unacked;
    const length = unacked.length;
    unacked[length] = message.n;
    this.#unackedBytes += message.n;
    Atomics.store(words, CREDIT_BYTES, this.#unackedBytes);
    Atomics.add(words, CREDIT_EVENTS, 1);
    try {
      this.post(message);
    } catch (e) {
      unacked.length = length;
      this.#unackedBytes -= message.n;
      Atomics.store(words, CREDIT_BYTES, this.#unackedBytes);
      Atomics.add(words, CREDIT_EVENTS, -1);
      throw e;
    }
  }
  /** Settles the outputs the host has acknowledged since the last look (`CREDIT_ACKED`). */
  #settleCredit() {
    const words = this.#credit.words;
    const acked = Atomics.load(words, CREDIT_ACKED);
    const unacked = this.#unacked;
    let head = this.#unackedHead;
    while (this.#ackedSeen !== acked && head < unacked.length) {
      this.#unackedBytes -= unacked[head++];
      this.#ackedSeen = this.#ackedSeen + 1 | 0;
    }
    if (head === unacked.length) this.#ackedSeen = acked;
    if (head > 1024 && head * 2 > unacked.length) {
      this.#unacked = unacked.slice(head);
      head = 0;
    }
    this.#unackedHead = head;
    Atomics.store(words, CREDIT_BYTES, this.#unackedBytes);
  }
  /**
   * Waits while the cell is over its output credit (the item is already posted).
   *
   * @returns false when the stop word was set: the helper call throws
   */
  awaitCredit() {
    const credit = this.#credit;
    const words = credit.words;
    for (; ; ) {
      const generation = Atomics.load(words, CREDIT_GENERATION);
      if (this.#owner.livePhase() !== PHASE_RUNNING) return false;
      this.#settleCredit();
      if (this.#unacked.length - this.#unackedHead <= credit.maxEvents && this.#unackedBytes <= credit.maxBytes) return true;
      this.#owner.busy?.pause();
      Atomics.wait(words, CREDIT_GENERATION, generation);
      this.#owner.busy?.resume();
    }
  }
  /**
   * Sends `message` (after `started`, when that is still pending): as frames written to the
   * runtime's stream when the cell has a writer, else posted whole (`cell_protocol.ts` item 3).
   */
  post(message) {
    let outputs = this.#startedPending ? [
      {
        t: "started"
      },
      message
    ] : [
      message
    ];
    try {
      if (this.#write !== void 0 && message.t !== "stopped" && message.t !== "pong") {
        if (message.t === "result" && message.writes.length > 0) {
          this.#writeStored(message.writes);
          message = {
            ...message,
            writes: []
          };
          outputs = [
            message
          ];
        }
        let frames;
        try {
          frames = encodeCellFrames(this.#cellId, outputs, this.#maxFrameBytes, FRAMES);
        } catch (e) {
          if (!(e instanceof FrameError)) throw e;
        }
        if (frames !== void 0) {
          Atomics.add(this.#credit.words, CELL_PROGRESS, 1);
          const result = message.t === "result";
          if (result) Atomics.store(this.#credit.words, CELL_RESULT, 1);
          this.#noticeOwed = result;
          this.#write(frames);
          this.#startedPending = false;
          if (result) {
            this.unsentResult = void 0;
            this.#sendNotice();
          }
          return;
        }
      }
      if (message.t === "result" && (this.#writesSent > 0 || storeBatchEnd(message.writes, 0) < message.writes.length)) {
        this.#postStored(message.writes);
        message = {
          ...message,
          writes: []
        };
        outputs = [
          message
        ];
      }
      this.#output?.postMessage(outputs.length === 1 ? outputs[0] : outputs);
      this.#startedPending = false;
    } catch (e) {
      if (e instanceof RangeError) throw e;
    }
  }
  /**
   * Writes a result's stored writes ahead of it, one `StoredWrites` frame per batch
   * (`proto/store_batches.ts`), each its own write under the stream lock: a million keys never
   * become one buffer in the cell's heap, and other cells' frames may pass between batches (the
   * host collects a cell's writes until its result). `started`, when still pending, leads the
   * first batch. A write cut short by a stack overflow goes on from the batch it failed on.
   */
  #writeStored(writes) {
    const words = this.#credit.words;
    while (this.#writesSent < writes.length) {
      const from = this.#writesSent;
      const end = storeBatchEnd(writes, from);
      let frames = encodeStoredWrites(this.#cellId, writes, from, end, this.#maxFrameBytes, FRAMES);
      if (this.#startedPending) {
        const started = encodeCellFrames(this.#cellId, [
          {
            t: "started"
          }
        ], this.#maxFrameBytes);
        const both = new Uint8Array(started.length + frames.length);
        both.set(started);
        both.set(frames, started.length);
        frames = both;
      }
      Atomics.add(words, CELL_PROGRESS, 1);
      this.#write(frames);
      this.#startedPending = false;
      this.#writesSent = end;
    }
  }
  /**
   * Posts a result's stored writes ahead of it, one `storedWrites` message per batch, for a cell
   * that posts its outputs whole (in-process isolation) and has more than one batch to send: the
   * runtime's thread takes and forwards
   * each batch on its own, never the whole set in one message. `started`, when still pending,
   * leads the first batch; a post cut short by a stack overflow goes on from its batch.
   */
  #postStored(writes) {
    while (this.#writesSent < writes.length) {
      const from = this.#writesSent;
      const end = storeBatchEnd(writes, from);
      const batch = {
        t: "storedWrites",
        writes: writes.slice(from, end)
      };
      this.#output?.postMessage(this.#startedPending ? [
        {
          t: "started"
        },
        batch
      ] : batch);
      this.#startedPending = false;
      this.#writesSent = end;
    }
  }
  /** Tells the runtime the result is written (retried by the cell run if this ran out of stack). */
  #sendNotice() {
    this.#output?.postMessage(WRITTEN_RESULT);
    this.#noticeOwed = false;
  }
};

// worker/cell_busy.ts
var BusyStretches = class {
  #words;
  /** Nested entries (an evaluation enters the context again to drain it). */
  #depth = 0;
  #ended;
  /** @param ended called with a stretch's number as a stretch the runtime reported ends */
  constructor(ended) {
    this.#ended = ended;
  }
  /** Counts the stretches of a cell run in `words` (its shared words); none without. */
  open(words) {
    this.#words = words;
    this.#depth = 0;
  }
  /** Synchronous code begins (nested calls count once). */
  enter() {
    if (this.#depth++ === 0) this.#begin();
  }
  /** The code begun by the matching {@link BusyStretches.enter} is over. */
  leave() {
    if (--this.#depth === 0) this.#end();
  }
  /** A wait inside the code (for output credit): the stretch ends for it. */
  pause() {
    if (this.#depth > 0) this.#end();
  }
  /** The wait is over: a new stretch begins. */
  resume() {
    if (this.#depth > 0) this.#begin();
  }
  #begin() {
    const words = this.#words;
    if (words !== void 0 && (Atomics.load(words, CELL_BUSY) & 1) === 0) Atomics.add(words, CELL_BUSY, 1);
  }
  #end() {
    const words = this.#words;
    if (words === void 0) return;
    const stretch = Atomics.load(words, CELL_BUSY);
    if ((stretch & 1) === 0) return;
    Atomics.add(words, CELL_BUSY, 1);
    if (Atomics.load(words, CELL_BUSY_REPORTED) === stretch) this.#ended(stretch);
  }
};

// worker/cell_realm.ts
import vm2 from "node:vm";

// worker/cell_combinators.ts
var CELL_COMBINATORS_SOURCE = `// Cell helpers implemented in JavaScript: the promise combinators and content().
// Every call site that can appear in a stack frame keeps the line and column it has
// in Codex's host, so that the frames of errors passing through them read the same.
(emitBlock) => {
  function as_settled(promises) {
    let queue = [];
    let outstanding = 0;
    let waiting;
    let finished = false;
    const record = (result) => {
      outstanding--;
      if (finished) {
        return;
      }
      queue.push(result);
      if (waiting !== undefined) {
        const wake = waiting;
        waiting = undefined;
        wake();
      }
    };
    const keyed = promises instanceof Map;
    let position = 0;
    try {
      for (const entry of promises) {
        const [index, promise] = keyed ? entry : [position++, entry];
        outstanding++;
        Promise.resolve(promise).then(
          (value) => record({ index, status: "fulfilled", value }),
          (reason) => record({ index, status: "rejected", reason }),
        );
      }
    } catch (error) {
      finished = true;
      throw error;
    }
    const drain = async function* () {
      try {
        while (outstanding > 0 || queue.length > 0) {
          if (queue.length === 0) {
            await new Promise((resolve) => {
              waiting = resolve;
            });
          }
          const taken = queue;
          queue = [];
          yield* taken;
        }
      } finally {
        finished = true;
        queue = [];
      }
    };
    return drain();
  }

  async function stream_settled(promises, emit) {
    if (typeof emit !== "function") {
      throw new TypeError("stream_settled requires a callback");
    }
    for await (const result of as_settled(promises)) {
      await emit(result);
    }
  }

  // content(): one block, or each element of an iterable of blocks. A string is
  // one block (never its characters). The iterator method is read once, through a
  // getter if it is one, and called on its own receiver, so a stateful getter or a
  // generator sees exactly one read and one call. Each block goes to emitBlock,
  // which validates it and throws a plain string when it is not a content block.
  const iteratorKey = Symbol.iterator;
  const apply = Reflect.apply;

  const content = function content(value) {
    const iterate =
      typeof value === "string" ? undefined : value?.[iteratorKey];
    if (typeof iterate !== "function") {
      return emitBlock(value);
    }

    // A fresh iterable around the method already read: the for-of below then closes
    // the iterator when the emitter throws.
    const blocks = { [iteratorKey]: () => apply(iterate, value, []) };
    for (const block of blocks) {
      emitBlock(block);
    }
  };
  return { as_settled, stream_settled, content };
}
`;

// worker/cell_helper_content.ts
function createContentHelpers(kit, json) {
  const { describe, emit, isObjectLike, live, startsWithIgnoreCase } = kit;
  const { readBlock, toOutputText } = json;
  const ReflectApply = Reflect.apply;
  const getOwnPropertyNames = Object.getOwnPropertyNames;
  const stringify = JSON.stringify;
  const numberIsFinite = Number.isFinite;
  const mathTrunc = Math.trunc;
  const stringToLowerCase = String.prototype.toLowerCase;
  const IMAGE_GENERIC = "image expects a non-empty image URL string, an object with image_url and optional detail, or a raw MCP image block";
  const IMAGE_DETAIL_TYPE = "image detail must be a string when provided";
  const AUDIO_GENERIC = "audio expects a non-empty audio URL string, an object with audio_url, or a raw MCP audio block";
  const CONTENT_GENERIC = "content expects one MCP ContentBlock";
  function blockUrl(block, kind, prefix) {
    const data = block.data;
    if (typeof data !== "string" || data === "") throw prefix + " expected MCP " + kind + " data";
    const mimeType = block.mimeType;
    const snake = block.mime_type;
    let mime = typeof mimeType === "string" ? mimeType : typeof snake === "string" ? snake : "";
    if (mime === "") mime = "application/octet-stream";
    return startsWithIgnoreCase(data, "data:") ? data : "data:" + mime + ";base64," + data;
  }
  function metaDetail(block) {
    const meta = block._meta;
    if (!isObjectLike(meta)) return void 0;
    const detail = meta["codex/imageDetail"];
    return detail === "auto" || detail === "low" || detail === "high" || detail === "original" ? detail : void 0;
  }
  function checkImageUrl(url) {
    if (startsWithIgnoreCase(url, "http://") || startsWithIgnoreCase(url, "https://")) {
      throw "Tool call failed: remote image URLs are not supported in tool outputs. Pass a base64 data URI instead";
    }
    if (!startsWithIgnoreCase(url, "data:")) {
      throw "Tool call failed: invalid image output. Pass a base64 data URI instead";
    }
  }
  function normalizeDetail(detail) {
    if (detail === void 0) return "high";
    const lower = ReflectApply(stringToLowerCase, detail, []);
    if (lower !== "auto" && lower !== "low" && lower !== "high" && lower !== "original") {
      throw "image detail must be one of: auto, low, high, original";
    }
    return lower;
  }
  function emitImage(input, override) {
    if (override !== void 0 && override !== null && typeof override !== "string") {
      throw IMAGE_DETAIL_TYPE;
    }
    let url;
    let detail;
    let pending;
    if (typeof input === "string") {
      if (input === "") throw IMAGE_GENERIC;
      url = input;
    } else if (isObjectLike(input)) {
      let imageUrl;
      try {
        imageUrl = input.image_url;
      } catch (e) {
        throw describe(e);
      }
      if (typeof imageUrl === "string") {
        if (imageUrl === "") throw IMAGE_GENERIC;
        url = imageUrl;
        let own;
        try {
          own = input.detail;
        } catch (e) {
          pending = {
            error: e
          };
        }
        if (own !== void 0 && own !== null && typeof own !== "string") throw IMAGE_DETAIL_TYPE;
        if (typeof own === "string") detail = own;
      } else if (imageUrl !== void 0) {
        throw IMAGE_GENERIC;
      } else {
        const block = readBlock(input);
        const type = block?.type;
        if (block === void 0 || typeof type !== "string") throw IMAGE_GENERIC;
        if (type !== "image") throw 'image only accepts MCP image blocks, got "' + type + '"';
        url = blockUrl(block, "image", "image");
        detail = metaDetail(block);
      }
    } else {
      throw IMAGE_GENERIC;
    }
    if (typeof override === "string") detail = override;
    checkImageUrl(url);
    emit(1, url, normalizeDetail(detail));
    if (pending !== void 0) throw pending.error;
  }
  function emitAudio(input) {
    let url;
    if (typeof input === "string") {
      if (input === "") throw AUDIO_GENERIC;
      url = input;
    } else if (isObjectLike(input)) {
      let audioUrl;
      try {
        audioUrl = input.audio_url;
      } catch (e) {
        throw describe(e);
      }
      if (typeof audioUrl === "string") {
        if (audioUrl === "") throw AUDIO_GENERIC;
        url = audioUrl;
      } else if (audioUrl !== void 0) {
        throw AUDIO_GENERIC;
      } else {
        const block = readBlock(input);
        const type = block?.type;
        if (block === void 0 || typeof type !== "string") throw AUDIO_GENERIC;
        if (type !== "audio") throw 'audio only accepts MCP audio blocks, got "' + type + '"';
        url = blockUrl(block, "audio", "audio");
      }
    } else {
      throw AUDIO_GENERIC;
    }
    if (!startsWithIgnoreCase(url, "data:")) {
      throw "Tool call failed: invalid audio output. Pass a base64 data URI instead";
    }
    emit(5, url, "");
  }
  function isString(value) {
    return typeof value === "string";
  }
  function optionalString(block, key) {
    const value = block[key];
    return value === void 0 || value === null || typeof value === "string";
  }
  function hasHugeInteger(value) {
    if (typeof value === "number") {
      return numberIsFinite(value) && mathTrunc(value) === value && value < 1e21 && value > -1e21 && (value >= 18446744073709552e3 || value < -9223372036854776e3);
    }
    if (!isObjectLike(value)) return false;
    const keys = getOwnPropertyNames(value);
    for (let i = 0; i < keys.length; i++) {
      if (hasHugeInteger(value[keys[i]])) return true;
    }
    return false;
  }
  function emitBlock(value) {
    live();
    if (value === void 0) throw CONTENT_GENERIC;
    const block = readBlock(value);
    if (block === void 0 || hasHugeInteger(block)) throw CONTENT_GENERIC;
    const type = block.type;
    if (type === "text") {
      if (!isString(block.text)) throw CONTENT_GENERIC;
      const meta = block._meta;
      if (isObjectLike(meta) && meta["codex/encryptedContent"] === true) {
        throw "content cannot emit encrypted MCP text";
      }
      emit(0, block.text, "");
      return void 0;
    }
    if (type === "image" || type === "audio") {
      if (!isString(block.data)) throw CONTENT_GENERIC;
      if (block.mimeType !== void 0 && block.mime_type !== void 0) throw CONTENT_GENERIC;
      if (!optionalString(block, "mimeType") || !optionalString(block, "mime_type")) throw CONTENT_GENERIC;
      const data = block.data;
      const mime = typeof block.mimeType === "string" ? block.mimeType : typeof block.mime_type === "string" ? block.mime_type : "application/octet-stream";
      const url = startsWithIgnoreCase(data, "data:") ? data : "data:" + mime + ";base64," + data;
      if (type === "image") emit(1, url, metaDetail(block) ?? "high");
      else emit(5, url, "");
      return void 0;
    }
    if (type === "resource") {
      const resource = block.resource;
      if (!isObjectLike(resource) || !isString(resource.uri)) throw CONTENT_GENERIC;
      if (!isString(resource.text) && !isString(resource.blob)) throw CONTENT_GENERIC;
      emit(0, stringify(block), "");
      return void 0;
    }
    if (type === "resource_link") {
      if (!isString(block.uri) || !isString(block.name)) throw CONTENT_GENERIC;
      if (!optionalString(block, "title") || !optionalString(block, "description") || !optionalString(block, "mimeType")) throw CONTENT_GENERIC;
      const size = block.size;
      if (size !== void 0 && size !== null && (typeof size !== "number" || mathTrunc(size) !== size || size >= 9223372036854776e3 || size < -9223372036854776e3)) throw CONTENT_GENERIC;
      emit(0, stringify(block), "");
      return void 0;
    }
    throw CONTENT_GENERIC;
  }
  function text(value) {
    live();
    emit(0, toOutputText(value), "");
    return void 0;
  }
  function image(imageUrlOrItem, detail) {
    live();
    emitImage(imageUrlOrItem, detail);
    return void 0;
  }
  function audio(audioUrlOrItem) {
    live();
    emitAudio(audioUrlOrItem);
    return void 0;
  }
  function generatedImage(result) {
    live();
    if (!isObjectLike(result)) throw "generatedImage expects an image generation result object";
    let hint;
    try {
      hint = result.output_hint;
    } catch {
      throw "failed to read generatedImage output_hint";
    }
    if (hint !== void 0 && typeof hint !== "string") {
      throw "generatedImage output_hint must be a string when provided";
    }
    emitImage(result, void 0);
    if (typeof hint === "string" && hint !== "") emit(0, hint, "");
    return void 0;
  }
  return {
    text,
    image,
    audio,
    generatedImage,
    emitBlock
  };
}

// worker/cell_helper_control.ts
function createControlHelpers(kit, json, bridgeTimer, limits) {
  const { INTERNAL, byteLength, emit, finish, live, phase, queueJob, settle } = kit;
  const { toOutputText } = json;
  const ReflectApply = Reflect.apply;
  const numberIsFinite = Number.isFinite;
  const mathTrunc = Math.trunc;
  const stringTrim = String.prototype.trim;
  const objectCreate = Object.create;
  const EXIT_SENTINEL = "__codex_code_mode_exit__";
  const timers = objectCreate(null);
  let nextTimerId = 0;
  function notify(value) {
    live();
    const message = toOutputText(value);
    if (ReflectApply(stringTrim, message, []) === "") throw "notify expects non-empty text";
    if (byteLength(message) > limits.maxMessageBytes) {
      throw "code-mode notification exceeds the " + limits.maxMessageBytes + "-byte gRPC message limit";
    }
    emit(3, message, "");
    return void 0;
  }
  function yield_control() {
    live();
    emit(2, "", "");
    return void 0;
  }
  function exit() {
    live();
    finish(2, "");
    throw EXIT_SENTINEL;
  }
  function setTimeout(callback, delayMs) {
    live();
    if (typeof callback !== "function") throw "setTimeout expects a function callback";
    let delay = +delayMs;
    delay = numberIsFinite(delay) && delay > 0 ? mathTrunc(delay) : 0;
    const id = ++nextTimerId;
    timers[id] = callback;
    try {
      bridgeTimer(0, id, delay);
    } catch {
      throw INTERNAL;
    }
    return id;
  }
  function clearTimeout(id) {
    live();
    if (id === void 0 || id === null) return void 0;
    let n;
    try {
      n = +id;
    } catch {
      throw "clearTimeout expects a numeric timeout id";
    }
    if (!numberIsFinite(n) || n <= 0) return void 0;
    n = mathTrunc(n);
    if (timers[n] !== void 0) {
      delete timers[n];
      try {
        bridgeTimer(1, n, 0);
      } catch {
        throw INTERNAL;
      }
    }
    return void 0;
  }
  function fireTimer(id) {
    const callback = timers[id];
    if (callback === void 0) return;
    delete timers[id];
    queueJob(() => {
      if (phase() !== 0) return;
      try {
        ReflectApply(callback, void 0, []);
      } catch (e) {
        settle(true, e);
      }
    });
  }
  return {
    notify,
    yield_control,
    exit,
    setTimeout,
    clearTimeout,
    fireTimer
  };
}

// worker/cell_helper_json.ts
function createJsonHelpers(kit) {
  const { describe, isObjectLike } = kit;
  const ReflectApply = Reflect.apply;
  const isArray = Array.isArray;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const StringCtor = String;
  const stringSlice = String.prototype.slice;
  const stringIndexOf = String.prototype.indexOf;
  const stringCharCodeAt = String.prototype.charCodeAt;
  const stringCodePointAt = String.prototype.codePointAt;
  const numberToString = Number.prototype.toString;
  const regexpTest = RegExp.prototype.test;
  const parseInteger = parseInt;
  const fromCodePoint = String.fromCodePoint;
  const Bytes = Uint8Array;
  const SERIALIZE = "failed to serialize JavaScript value: ";
  function toJson(value) {
    try {
      return stringify(value);
    } catch (e) {
      throw describe(e);
    }
  }
  function toOutputText(value) {
    const type = typeof value;
    if (type === "string") return value;
    if (value === void 0 || value === null || type === "boolean" || type === "number" || type === "bigint") {
      return StringCtor(value);
    }
    const json = toJson(value);
    return json === void 0 ? "undefined" : json;
  }
  function hex(code) {
    return ReflectApply(numberToString, code, [
      16
    ]);
  }
  function serializeJson(value) {
    const json = toJson(value);
    if (json === void 0) throw SERIALIZE + "expected value at line 1 column 1";
    const problem = jsonProblem(json);
    if (problem !== void 0) throw SERIALIZE + problem;
    return json;
  }
  function jsonProblem(json) {
    const n = json.length;
    if (n < 256 && ReflectApply(stringIndexOf, json, [
      "\\ud"
    ]) === -1 && ReflectApply(stringIndexOf, json, [
      "$serde_json::private::"
    ]) === -1) return void 0;
    const at = (i2) => ReflectApply(stringCharCodeAt, json, [
      i2
    ]);
    const hexAt = (i2) => parseInteger(ReflectApply(stringSlice, json, [
      i2,
      i2 + 4
    ]), 16);
    const objects = new Bytes(128);
    let depth = 0;
    let bytes = 0;
    let i = 0;
    let previous = 0;
    while (i < n) {
      const c = at(i);
      if (c === 34) {
        const isKey = depth > 0 && objects[depth - 1] === 1 && (previous === 123 || previous === 44);
        const start = i + 1;
        i++;
        bytes++;
        for (; ; ) {
          const d = at(i);
          if (d === 34) break;
          if (d === 92) {
            if (at(i + 1) !== 117) {
              i += 2;
              bytes += 2;
              continue;
            }
            const unit = hexAt(i + 2);
            i += 6;
            bytes += 6;
            if (unit >= 56320 && unit <= 57343) {
              return "lone leading surrogate in hex escape at line 1 column " + bytes;
            }
            if (unit >= 55296 && unit <= 56319) {
              if (at(i) !== 92) return "unexpected end of hex escape at line 1 column " + (bytes + 1);
              i++;
              bytes++;
              if (at(i) !== 117) return "unexpected end of hex escape at line 1 column " + (bytes + 1);
              const low = hexAt(i + 1);
              i += 5;
              bytes += 5;
              if (low < 56320 || low > 57343) {
                return "lone leading surrogate in hex escape at line 1 column " + bytes;
              }
            }
            continue;
          }
          if (d < 128) bytes += 1;
          else if (d < 2048) bytes += 2;
          else if (d >= 55296 && d <= 56319) {
            bytes += 4;
            i++;
          } else bytes += 3;
          i++;
        }
        if (isKey) {
          const key = ReflectApply(stringSlice, json, [
            start,
            i
          ]);
          if (key === "$serde_json::private::RawValue" || key === "$serde_json::private::Number") {
            return "reserved JSON object key";
          }
        }
        i++;
        bytes++;
        previous = 34;
        continue;
      }
      if (c === 91 || c === 123) {
        if (depth === 127) return "recursion limit exceeded at line 1 column " + (bytes + 1);
        objects[depth++] = c === 123 ? 1 : 0;
      } else if (c === 93 || c === 125) {
        depth--;
      }
      if (c === 91 || c === 123 || c === 93 || c === 125 || c === 44 || c === 58) previous = c;
      i++;
      bytes++;
    }
    return void 0;
  }
  const DEBUG_ESCAPED = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Mn}\p{Me}\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]/u;
  function debugQuoted(text) {
    let out = '"';
    for (let i = 0; i < text.length; i++) {
      let code = ReflectApply(stringCodePointAt, text, [
        i
      ]);
      if (code > 65535) i++;
      else if (code >= 55296 && code <= 57343) code = 65533;
      const ch = ReflectApply(fromCodePoint, StringCtor, [
        code
      ]);
      if (ch === '"') out += '\\"';
      else if (ch === "\\") out += "\\\\";
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (ch === "	") out += "\\t";
      else if (ch === "\0") out += "\\0";
      else if (ReflectApply(regexpTest, DEBUG_ESCAPED, [
        ch
      ])) out += "\\u{" + hex(code) + "}";
      else out += ch;
    }
    return out + '"';
  }
  function readBlock(value) {
    const json = serializeJson(value);
    const block = parse(json);
    return isObjectLike(block) && !isArray(block) ? block : void 0;
  }
  return {
    toOutputText,
    serializeJson,
    debugQuoted,
    readBlock
  };
}

// worker/cell_helper_kit.ts
function createHelperKit(bridgePhase, bridgeEmit, bridgeByteLength, bridgeFinish) {
  const global = globalThis;
  const ReflectApply = Reflect.apply;
  const defineProperty = Object.defineProperty;
  const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const getPrototypeOf = Object.getPrototypeOf;
  const PromiseCtor = Promise;
  const promiseThen = Promise.prototype.then;
  const PromiseProto = Promise.prototype;
  const speciesKey = Symbol.species;
  const speciesGetter = getOwnPropertyDescriptor(Promise, speciesKey)?.get;
  const ObjectProto = Object.prototype;
  const stringToLowerCase = String.prototype.toLowerCase;
  const stringSlice = String.prototype.slice;
  const functionBind = Function.prototype.bind;
  const STOPPED = "code-mode cell was stopped";
  const FINISHED = "code-mode cell has finished";
  const INTERNAL = "code-mode internal error";
  const settledPromise = PromiseCtor.resolve();
  defineProperty(settledPromise, "constructor", {
    __proto__: null,
    value: void 0
  });
  function queueJob(job) {
    ReflectApply(promiseThen, settledPromise, [
      job
    ]);
  }
  function phase() {
    try {
      return bridgePhase();
    } catch {
      throw INTERNAL;
    }
  }
  function live() {
    const p = phase();
    if (p === 1) throw STOPPED;
    if (p !== 0) throw FINISHED;
  }
  function emit(kind, a, b) {
    let posted;
    try {
      posted = bridgeEmit(kind, a, b);
    } catch {
      throw INTERNAL;
    }
    if (posted !== 0) live();
  }
  function byteLength(text) {
    try {
      return bridgeByteLength(text);
    } catch {
      throw INTERNAL;
    }
  }
  function finish(kind, errorText) {
    try {
      bridgeFinish(kind, errorText);
    } catch {
    }
  }
  function describe(value) {
    if (typeof value === "string") return value;
    if (value !== null && (typeof value === "object" || typeof value === "function")) {
      let stack;
      try {
        stack = value.stack;
      } catch {
        stack = void 0;
      }
      if (typeof stack === "string") return stack;
    }
    try {
      return `${value}`;
    } catch {
      return "";
    }
  }
  function settle(failed, value) {
    if (phase() !== 0) return;
    if (!failed) finish(0, "");
    else finish(1, describe(value));
  }
  function startsWithIgnoreCase(text, prefix) {
    return ReflectApply(stringToLowerCase, ReflectApply(stringSlice, text, [
      0,
      prefix.length
    ]), []) === prefix;
  }
  function isObjectLike(value) {
    return value !== null && (typeof value === "object" || typeof value === "function");
  }
  function installGlobal(name, value) {
    defineProperty(global, name, {
      __proto__: null,
      value,
      writable: true,
      enumerable: true,
      configurable: true
    });
  }
  function nativeLike(fn) {
    const bound = ReflectApply(functionBind, fn, [
      void 0
    ]);
    defineProperty(bound, "length", {
      __proto__: null,
      value: 0
    });
    defineProperty(bound, "name", {
      __proto__: null,
      value: ""
    });
    const prototype = {};
    defineProperty(prototype, "constructor", {
      __proto__: null,
      value: bound,
      writable: true,
      enumerable: false,
      configurable: true
    });
    defineProperty(bound, "prototype", {
      __proto__: null,
      value: prototype,
      writable: true,
      enumerable: false,
      configurable: false
    });
    return bound;
  }
  function watch(evaluation) {
    try {
      ReflectApply(promiseThen, evaluation, [
        () => settle(false, void 0),
        // After exit() the cell is over already, and its sentinel is ignored (settle checks).
        (reason) => settle(true, reason)
      ]);
    } catch (e) {
      settle(true, e);
    }
  }
  function fail(thrown) {
    settle(true, thrown);
  }
  function complete() {
    settle(false, void 0);
  }
  function promiseIntact() {
    try {
      const then = getOwnPropertyDescriptor(PromiseProto, "then");
      const ctor = getOwnPropertyDescriptor(PromiseProto, "constructor");
      const species = getOwnPropertyDescriptor(PromiseCtor, speciesKey);
      return then?.value === promiseThen && ctor?.value === PromiseCtor && species?.get === speciesGetter && getPrototypeOf(PromiseProto) === ObjectProto;
    } catch {
      return false;
    }
  }
  return {
    INTERNAL,
    queueJob,
    phase,
    live,
    emit,
    byteLength,
    finish,
    describe,
    settle,
    startsWithIgnoreCase,
    isObjectLike,
    nativeLike,
    installGlobal,
    watch,
    fail,
    complete,
    promiseIntact
  };
}

// worker/cell_helper_stacks.ts
function installStackTraces(kit, cellFileName) {
  const { isObjectLike } = kit;
  const ReflectApply = Reflect.apply;
  const defineProperty = Object.defineProperty;
  const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const getPrototypeOf = Object.getPrototypeOf;
  const objectCreate = Object.create;
  const isArray = Array.isArray;
  const stringIndexOf = String.prototype.indexOf;
  const stringSlice = String.prototype.slice;
  const FunctionProto = Function.prototype;
  const ErrorCtor = Error;
  const errorToString = Error.prototype.toString;
  const Bytes = Uint8Array;
  const INTERNAL_LIMIT = 64;
  const VISIBLE_LIMIT = 10;
  ErrorCtor.stackTraceLimit = INTERNAL_LIMIT;
  let callSiteProto;
  defineProperty(ErrorCtor, "prepareStackTrace", {
    __proto__: null,
    value: (_error, sites) => {
      callSiteProto = getPrototypeOf(sites[0]);
      return "";
    },
    writable: true,
    configurable: true
  });
  void new ErrorCtor().stack;
  delete ErrorCtor.prepareStackTrace;
  const siteFileName = callSiteProto.getFileName;
  const siteIsEval = callSiteProto.isEval;
  const siteToString = callSiteProto.toString;
  const USER = 0;
  const HIDDEN = 1;
  const BUILTIN = 2;
  function frameKind(site) {
    try {
      const file = ReflectApply(siteFileName, site, []);
      if (file === cellFileName || file === "") return USER;
      if (typeof file === "string") return HIDDEN;
      return ReflectApply(siteIsEval, site, []) === true ? USER : BUILTIN;
    } catch {
      return HIDDEN;
    }
  }
  function visibleSites(sites) {
    const visible = [];
    if (!isArray(sites)) return visible;
    const keep = new Bytes(sites.length);
    let below = USER;
    for (let i = sites.length - 1; i >= 0; i--) {
      const kind = frameKind(sites[i]);
      if (kind === BUILTIN) {
        keep[i] = below === USER ? 1 : 0;
      } else {
        keep[i] = kind === USER ? 1 : 0;
        below = kind;
      }
    }
    for (let i = 0; i < sites.length; i++) {
      if (keep[i] === 0) continue;
      defineProperty(visible, visible.length, {
        __proto__: null,
        value: sites[i],
        writable: true,
        enumerable: true,
        configurable: true
      });
    }
    return visible;
  }
  function siteText(site) {
    try {
      return "\n    at " + ReflectApply(siteToString, site, []);
    } catch {
      return "";
    }
  }
  function formatStack(error, sites) {
    let header;
    if (isArray(sites) && sites.length > 0) {
      try {
        const own = error.stack;
        const first = siteText(sites[0]);
        if (typeof own === "string" && first !== "") {
          const at = ReflectApply(stringIndexOf, own, [
            first
          ]);
          if (at >= 0) header = ReflectApply(stringSlice, own, [
            0,
            at
          ]);
        }
      } catch {
        header = void 0;
      }
    }
    if (header === void 0) header = describeHeader(error);
    let out = header;
    const visible = visibleSites(sites);
    let count = visible.length;
    if (count > VISIBLE_LIMIT && limitProperty()?.value === INTERNAL_LIMIT) count = VISIBLE_LIMIT;
    for (let i = 0; i < count; i++) out += siteText(visible[i]);
    return out;
  }
  function describeHeader(error) {
    try {
      return ReflectApply(errorToString, error, []);
    } catch {
      return "Error";
    }
  }
  let userPrepare;
  function prepareWithUser(error, sites) {
    return ReflectApply(userPrepare, ErrorCtor, [
      error,
      visibleSites(sites)
    ]);
  }
  let probing = false;
  const PROBE = objectCreate(null);
  const probe = () => PROBE;
  function limitProperty() {
    const own = getOwnPropertyDescriptor(ErrorCtor, "stackTraceLimit");
    return own !== void 0 && "value" in own && own.writable === true ? {
      value: own.value
    } : void 0;
  }
  function formattingNow() {
    probing = true;
    const limit = limitProperty();
    if (limit !== void 0) ErrorCtor.stackTraceLimit = 0;
    let stack;
    try {
      stack = new ErrorCtor().stack;
    } catch {
      stack = void 0;
    } finally {
      probing = false;
      if (limit !== void 0) ErrorCtor.stackTraceLimit = limit.value;
    }
    return typeof stack === "string";
  }
  defineProperty(FunctionProto, "prepareStackTrace", {
    __proto__: null,
    get() {
      if (probing) return probe;
      if (formattingNow()) return typeof userPrepare === "function" ? prepareWithUser : formatStack;
      return this === ErrorCtor ? userPrepare : void 0;
    },
    set(value) {
      if (this === ErrorCtor) {
        userPrepare = value;
        return;
      }
      if (isObjectLike(this)) {
        defineProperty(this, "prepareStackTrace", {
          __proto__: null,
          value,
          writable: true,
          enumerable: true,
          configurable: true
        });
      }
    },
    enumerable: false,
    configurable: false
  });
}

// worker/cell_helper_store.ts
function createStoreHelpers(kit, json, bridgeStore, bridgeLoad, limits) {
  const { INTERNAL, live } = kit;
  const { debugQuoted, serializeJson } = json;
  const parse = JSON.parse;
  function keyText(key, message) {
    try {
      return `${key}`;
    } catch {
      throw message;
    }
  }
  function store(key, value) {
    live();
    const name = keyText(key, "store key must be a string");
    if (value === void 0) {
      throw "Unable to store " + debugQuoted(name) + ". Only plain serializable objects can be stored.";
    }
    const json2 = serializeJson(value);
    let stored;
    try {
      stored = bridgeStore(name, json2);
    } catch {
      throw INTERNAL;
    }
    if (stored === 1) {
      throw "stored values exceed the " + limits.maxStoredValueBytes + "-byte session limit";
    }
    if (stored !== 0) live();
    return void 0;
  }
  function load(key) {
    live();
    const name = keyText(key, "load key must be a string");
    let json2;
    try {
      json2 = bridgeLoad(name);
    } catch {
      throw INTERNAL;
    }
    if (json2 === void 0) return void 0;
    try {
      return parse(json2);
    } catch {
      throw "failed to load stored value";
    }
  }
  return {
    store,
    load
  };
}

// worker/cell_helper_tools.ts
function createToolHelpers(kit, json, bridgeCallTool, limits) {
  const { INTERNAL, byteLength, emit, installGlobal, live, nativeLike, phase, queueJob } = kit;
  const { serializeJson } = json;
  const defineProperty = Object.defineProperty;
  const parse = JSON.parse;
  const PromiseCtor = Promise;
  const objectCreate = Object.create;
  const pendingTools = objectCreate(null);
  function callTool(name, arg) {
    live();
    const input = arg === void 0 ? void 0 : serializeJson(arg);
    if (input !== void 0 && byteLength(input) > limits.maxMessageBytes) {
      const message = "code-mode tool invocation exceeds the " + limits.maxMessageBytes + "-byte gRPC message limit";
      return new PromiseCtor((_resolve, reject) => reject(message));
    }
    let settlers;
    const promise = new PromiseCtor((resolve, reject) => {
      settlers = {
        __proto__: null,
        resolve,
        reject
      };
    });
    let id;
    try {
      id = bridgeCallTool(name, input);
    } catch {
      throw INTERNAL;
    }
    if (id === "") live();
    pendingTools[id] = settlers;
    return promise;
  }
  function install(toolsJson) {
    const toolList = parse(toolsJson);
    const tools = {};
    for (let i = 0; i < toolList.length; i++) {
      const toolName = toolList[i].name;
      const tool = function(arg) {
        return callTool(toolName, arg);
      };
      defineProperty(tools, toolName, {
        __proto__: null,
        value: nativeLike(tool),
        writable: true,
        enumerable: true,
        configurable: true
      });
    }
    installGlobal("tools", tools);
    installGlobal("ALL_TOOLS", toolList);
  }
  function deliver(id, isError, payload) {
    const settlers = pendingTools[id];
    if (settlers === void 0) return;
    delete pendingTools[id];
    queueJob(() => {
      if (phase() !== 0) return;
      emit(4, id, "");
      if (isError) {
        settlers.reject(payload);
        return;
      }
      let value;
      try {
        value = parse(payload);
      } catch {
        settlers.reject("code-mode tool result is not valid JSON");
        return;
      }
      settlers.resolve(value);
    });
  }
  return {
    install,
    deliver
  };
}

// worker/cell_helper_globals.ts
function cellHelpersSource() {
  const factories = {
    createCellHelpers,
    createHelperKit,
    createJsonHelpers,
    createContentHelpers,
    createStoreHelpers,
    createControlHelpers,
    createToolHelpers,
    installStackTraces,
    guardFinalizationRegistry
  };
  const members = Object.entries(factories).map(([name, factory]) => `${name}: ${factory.toString()}`);
  return `"use strict";({
${members.join(",\n")}
})`;
}
function createCellHelpers(parts, bridgePhase, bridgeEmit, bridgeCallTool, bridgeByteLength, bridgeLoad, bridgeStore, bridgeTimer, bridgeFinish, combinators, allowlistJson, cellFileName, _helpersFileName) {
  const global = globalThis;
  const getOwnPropertyNames = Object.getOwnPropertyNames;
  const objectCreate = Object.create;
  const parse = JSON.parse;
  const limits = {
    __proto__: null,
    maxMessageBytes: 0,
    maxStoredValueBytes: 0
  };
  const kit = parts.createHelperKit(bridgePhase, bridgeEmit, bridgeByteLength, bridgeFinish);
  const json = parts.createJsonHelpers(kit);
  const content = parts.createContentHelpers(kit, json);
  const stored = parts.createStoreHelpers(kit, json, bridgeStore, bridgeLoad, limits);
  const control = parts.createControlHelpers(kit, json, bridgeTimer, limits);
  const tools = parts.createToolHelpers(kit, json, bridgeCallTool, limits);
  parts.installStackTraces(kit, cellFileName);
  const allowed = objectCreate(null);
  const allowlist = parse(allowlistJson);
  for (let i = 0; i < allowlist.length; i++) allowed[allowlist[i]] = true;
  const names = getOwnPropertyNames(global);
  for (let i = 0; i < names.length; i++) {
    if (allowed[names[i]] !== true) delete global[names[i]];
  }
  const { installGlobal, nativeLike } = kit;
  const made = combinators(nativeLike(content.emitBlock));
  const helpers = [
    [
      "text",
      nativeLike(content.text)
    ],
    [
      "image",
      nativeLike(content.image)
    ],
    [
      "audio",
      nativeLike(content.audio)
    ],
    [
      "generatedImage",
      nativeLike(content.generatedImage)
    ],
    [
      "content",
      made.content
    ],
    [
      "store",
      nativeLike(stored.store)
    ],
    [
      "load",
      nativeLike(stored.load)
    ],
    [
      "notify",
      nativeLike(control.notify)
    ],
    [
      "yield_control",
      nativeLike(control.yield_control)
    ],
    [
      "exit",
      nativeLike(control.exit)
    ],
    [
      "setTimeout",
      nativeLike(control.setTimeout)
    ],
    [
      "clearTimeout",
      nativeLike(control.clearTimeout)
    ],
    [
      "as_settled",
      made.as_settled
    ],
    [
      "stream_settled",
      made.stream_settled
    ]
  ];
  for (let i = 0; i < helpers.length; i++) installGlobal(helpers[i][0], helpers[i][1]);
  parts.guardFinalizationRegistry(bridgePhase);
  function configure(toolsJson, messageLimit, storedLimit) {
    limits.maxMessageBytes = messageLimit;
    limits.maxStoredValueBytes = storedLimit;
    tools.install(toolsJson);
  }
  return {
    watch: kit.watch,
    fail: kit.fail,
    complete: kit.complete,
    promiseIntact: kit.promiseIntact,
    fireTimer: control.fireTimer,
    deliver: tools.deliver,
    configure,
    describe: kit.describe
  };
}
function guardFinalizationRegistry(bridgePhase) {
  const global = globalThis;
  const ReflectApply = Reflect.apply;
  const defineProperty = Object.defineProperty;
  const Registry = global.FinalizationRegistry;
  if (typeof Registry === "function") {
    const construct = Reflect.construct;
    const guarded = new Proxy(Registry, {
      __proto__: null,
      construct(target, args, newTarget) {
        const cleanup = args[0];
        if (typeof cleanup === "function") {
          args[0] = function(held) {
            let running = false;
            try {
              running = bridgePhase() === 0;
            } catch {
            }
            if (running) return ReflectApply(cleanup, void 0, [
              held
            ]);
          };
        }
        return ReflectApply(construct, void 0, [
          target,
          args,
          newTarget
        ]);
      }
    });
    defineProperty(Registry.prototype, "constructor", {
      __proto__: null,
      value: guarded,
      writable: true,
      enumerable: false,
      configurable: true
    });
    defineProperty(global, "FinalizationRegistry", {
      __proto__: null,
      value: guarded,
      writable: true,
      enumerable: false,
      configurable: true
    });
  }
}

// worker/cell_realm.ts
var CELL_HELPERS_FILE_NAME = "code_mode_helpers.js";
var CELL_GLOBAL_ALLOWLIST = Object.freeze([
  "globalThis",
  "Infinity",
  "NaN",
  "undefined",
  "eval",
  "isFinite",
  "isNaN",
  "parseFloat",
  "parseInt",
  "decodeURI",
  "decodeURIComponent",
  "encodeURI",
  "encodeURIComponent",
  "escape",
  "unescape",
  "AggregateError",
  "Array",
  "ArrayBuffer",
  "BigInt",
  "BigInt64Array",
  "BigUint64Array",
  "Boolean",
  "DataView",
  "Date",
  "Error",
  "EvalError",
  "FinalizationRegistry",
  "Float16Array",
  "Float32Array",
  "Float64Array",
  "Function",
  "Int8Array",
  "Int16Array",
  "Int32Array",
  "Iterator",
  "JSON",
  "Map",
  "Math",
  "Number",
  "Object",
  "Promise",
  "Proxy",
  "RangeError",
  "ReferenceError",
  "Reflect",
  "RegExp",
  "Set",
  "String",
  "Symbol",
  "SyntaxError",
  "TypeError",
  "Uint8Array",
  "Uint8ClampedArray",
  "Uint16Array",
  "Uint32Array",
  "URIError",
  "WeakMap",
  "WeakRef",
  "WeakSet",
  "Intl",
  // Further ECMAScript-standard globals V8 provides.
  "AsyncDisposableStack",
  "DisposableStack",
  "SuppressedError"
]);
var DRAIN_CONTEXT = new vm2.Script("0", {
  filename: CELL_HELPERS_FILE_NAME
});
var helpersScript;
var combinatorsScript;
function createCellRealm(bridges) {
  const context = vm2.createContext(vm2.constants.DONT_CONTEXTIFY, {
    microtaskMode: "afterEvaluate"
  });
  helpersScript ??= new vm2.Script(cellHelpersSource(), {
    filename: CELL_HELPERS_FILE_NAME
  });
  combinatorsScript ??= new vm2.Script(CELL_COMBINATORS_SOURCE, {
    filename: ""
  });
  const factories = helpersScript.runInContext(context);
  const combinators = combinatorsScript.runInContext(context);
  const b = bridges;
  const controller = factories.createCellHelpers(factories, b.phase, b.emit, b.callTool, b.byteLength, b.load, b.store, b.timer, b.finish, combinators, JSON.stringify(CELL_GLOBAL_ALLOWLIST), CELL_FILE_NAME, CELL_HELPERS_FILE_NAME);
  return {
    context,
    controller
  };
}

// worker/store_snapshot.ts
var HEADER_WORDS = 2;
function hash(key) {
  let h = 2166136261;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 16777619);
  return h >>> 0;
}
var SnapshotReader = class {
  #words;
  #chars;
  #mask;
  #index;
  /**
   * @param buffer a base built by {@link buildSnapshot}
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { buildSnapshot, SnapshotReader } from "./store_snapshot.ts";
   * const reader = new SnapshotReader(buildSnapshot(new Map([["a", "1"], ["é", '"x"']])));
   * assert.deepEqual([reader.get("a"), reader.get("é"), reader.get("b")], ["1", '"x"', undefined]);
   * ```
   */
  constructor(buffer) {
    const head = new Int32Array(buffer, 0, HEADER_WORDS);
    const count = head[0];
    const tableSize = head[1];
    const wordsLength = HEADER_WORDS + tableSize + 3 * count;
    this.#words = new Int32Array(buffer, 0, wordsLength);
    this.#chars = new Uint16Array(buffer, 4 * wordsLength);
    this.#mask = tableSize - 1;
    this.#index = HEADER_WORDS + tableSize;
  }
  /** The JSON text stored under `key`, or `undefined`. */
  get(key) {
    const words = this.#words;
    const chars = this.#chars;
    const length = key.length;
    for (let slot = hash(key) & this.#mask; ; slot = slot + 1 & this.#mask) {
      const entry = words[HEADER_WORDS + slot];
      if (entry === 0) return void 0;
      const at = this.#index + 3 * (entry - 1);
      if (words[at + 1] !== length) continue;
      const start = words[at];
      let same = true;
      for (let j = 0; j < length; j++) {
        if (chars[start + j] !== key.charCodeAt(j)) {
          same = false;
          break;
        }
      }
      if (same) return decode(chars, start + length, words[at + 2]);
    }
  }
};
var DECODE_CHUNK = 8192;
function decode(chars, start, length) {
  if (length <= DECODE_CHUNK) {
    return String.fromCharCode.apply(null, chars.subarray(start, start + length));
  }
  const parts = [];
  for (let at = start; at < start + length; at += DECODE_CHUNK) {
    const end = Math.min(at + DECODE_CHUNK, start + length);
    parts.push(String.fromCharCode.apply(null, chars.subarray(at, end)));
  }
  return parts.join("");
}

// worker/cell_run.ts
var MAX_HOST_TIMER_MS = MAX_INT32;
var CellRun = class {
  #start;
  #outbox = new CellOutbox(this);
  /** The cell's synchronous stretches; the end of a reported one is written as `idle`. */
  busy = new BusyStretches((stretch) => {
    if (this.#phase !== PHASE_RUNNING) return;
    try {
      this.#outbox.post({
        t: "idle",
        stretch
      });
    } catch {
    }
  });
  #credit;
  #phase = PHASE_RUNNING;
  #hostTimers = /* @__PURE__ */ new Map();
  #nextToolId = 0;
  /** The cell's view of the stored values: its snapshot's overlay and its own writes, over `#base`. */
  #view = /* @__PURE__ */ new Map();
  /** The snapshot's shared base, if any (`store_snapshot.ts`). */
  #base;
  /** UTF-8 bytes of the view; computed on the first `store` (`-1` until then). */
  #viewBytes = -1;
  #writes = /* @__PURE__ */ new Map();
  #context;
  #controller;
  /** The cell's module, until it is disposed. */
  #module;
  /** A completion or failure reported during a drain: taken when the drain is over. */
  #pendingFinish;
  /** Called in the macrotask after the one that finished the cell (reuse, `cell_protocol.ts` 3a). */
  #onFinished;
  /** The cell's ID, once it began. */
  get cellId() {
    return this.#start?.cellId;
  }
  /**
   * Whether the cell *completed* and its cell worker may run another cell (SPEC §5.1): its result
   * is sent, it was never stopped (no stop word, no `stop`), and its timers are cleared.
   */
  get reusable() {
    return this.#phase === PHASE_FINISHED && !this.#outbox.resultOwed && this.#hostTimers.size === 0 && (this.#credit === void 0 || Atomics.load(this.#credit.words, CREDIT_STOP) === 0);
  }
  /**
   * Builds the context and the helpers ahead of the cell, while this cell worker waits as the
   * session's spare: only `tools`, `ALL_TOOLS` and the limits depend on the cell (see `begin`).
   */
  prepare() {
    const realm = createCellRealm(this.#bridges());
    this.#context = realm.context;
    this.#controller = realm.controller;
  }
  /**
   * Runs, once, the platform code every cell needs, so that its lazy set-up (Deno's `node:timers`,
   * compiling, linking and evaluating a module in the context, ~0.7 ms in all) is not paid by the
   * first cell. It evaluates an empty module in the context and arms and clears one host timer:
   * nothing a cell can observe.
   */
  warmUp() {
    const context = this.#context;
    if (context === void 0) return;
    clearHostTimer(setHostTimer(() => {
    }, 1e3));
    warmUpModules(context);
  }
  /** Lets go of what Deno keeps of the cell's module after the cell (see `disposeCellModule`). */
  dispose() {
    const module = this.#module;
    this.#module = void 0;
    if (module !== void 0) disposeCellModule(module);
  }
  /**
   * Starts the prepared cell: installs its tools and limits, posts `started`, and compiles and
   * evaluates the source once, inside a macrotask (`cell_bootstrap.ts`: heap limit): the current
   * one when `inMacrotask` (the park of a warmed spare), else a new one.
   *
   * @param start the runtime's `start` message
   * @param warm the output port and words handed over by `warm`, if any
   * @param inMacrotask the caller runs in a macrotask and nothing follows the call in it
   * @param write writes the cell's frames to the runtime's stream (`cell_protocol.ts` item 3);
   *   without it every output is posted whole
   * @param onFinished called in the macrotask after the one that finished the cell
   */
  begin(start, warm, inMacrotask, write = warm?.write, onFinished) {
    this.#start = start;
    this.#onFinished = onFinished;
    const words = start.credit?.words ?? warm?.words;
    const credit = this.#credit = start.credit && words ? {
      ...start.credit,
      words
    } : {
      words: new Int32Array(new SharedArrayBuffer(4 * CELL_WORDS)),
      maxEvents: Infinity,
      maxBytes: Infinity,
      trimTextOver: Infinity,
      keepTextBytes: 0,
      dropMediaOver: Infinity
    };
    this.busy.open(start.credit && words ? words : void 0);
    this.#outbox.open({
      cellId: start.cellId,
      maxFrameBytes: start.maxFrameBytes || DEFAULT_MAX_FRAME_BYTES,
      output: start.output ?? warm?.port,
      write,
      credit
    });
    this.#view = new Map(start.store);
    this.#base = start.storeBase === void 0 ? void 0 : new SnapshotReader(start.storeBase);
    if (start.storeBytes !== void 0) this.#viewBytes = start.storeBytes;
    const tools = start.tools.map((tool) => ({
      name: String(tool.name),
      description: String(tool.description)
    }));
    this.#controller.configure(JSON.stringify(tools), start.maxMessageBytes, start.maxStoredValueBytes);
    if (Atomics.load(credit.words, CREDIT_STOP) !== 0) {
      this.control({
        t: "stop",
        cell: start.cellId
      });
      return;
    }
    this.#outbox.holdStarted();
    const run = () => {
      this.#evaluate();
      this.#outbox.sendStartedIfPending();
    };
    if (inMacrotask) run();
    else setHostImmediate(run);
  }
  /**
   * Compiles the source as the ES module `exec_main.mjs` and evaluates it once; runs inside a
   * macrotask. The module's synchronous part, and every microtask it queues, run inside
   * `evaluate()` (the context drains its queue at the end of each evaluation); the module's
   * promise, settled or not, is then watched from the context.
   */
  #evaluate() {
    this.busy.enter();
    try {
      this.#evaluateNow();
    } finally {
      this.busy.leave();
    }
  }
  #evaluateNow() {
    const context = this.#context;
    if (context === void 0 || this.#phase !== PHASE_RUNNING) return;
    let module;
    try {
      module = compileCellModule(this.#start.source, context);
    } catch (e) {
      this.#finish(1, describeCompileError(e));
      return;
    }
    this.#module = module;
    const requests = module.moduleRequests;
    if (requests.length > 0) {
      this.#finish(1, `Unsupported import in exec: ${requests[0].specifier}`);
      return;
    }
    let evaluation;
    try {
      module.linkRequests([]);
      module.instantiate();
      evaluation = module.evaluate();
    } catch (e) {
      this.#enter((c) => c.fail(e));
      return;
    }
    if (module.status === "errored") {
      const error = module.error;
      this.#enter((c) => c.fail(error));
    } else if (!this.#controller.promiseIntact()) {
      this.#enter((c) => c.complete());
    } else {
      this.#enter((c) => c.watch(evaluation));
    }
  }
  /** Handles a control message other than `start`. */
  control(message) {
    if (message.t === "ping") {
      this.#outbox.post({
        t: "pong"
      });
      return;
    }
    const target = message.cell;
    if (target !== void 0 && target !== this.#start?.cellId) return;
    if (message.t === "stop") {
      if (this.#phase === PHASE_RUNNING) this.#phase = PHASE_STOPPED;
      this.#clearHostTimers();
      this.#outbox.post({
        t: "stopped"
      });
      const words = this.#credit?.words;
      if (words) {
        Atomics.store(words, CELL_STOPPED, 1);
        Atomics.notify(words, CELL_STOPPED);
      }
    } else if (message.t === "toolResult") {
      if (this.#phase !== PHASE_RUNNING) return;
      const isError = "error" in message && typeof message.error === "string";
      const payload = isError ? message.error : String(message.json);
      const id = String(message.id);
      setHostImmediate(() => this.#enter((c) => c.deliver(id, isError, payload)));
    }
  }
  #bridges() {
    return {
      phase: () => this.livePhase(),
      emit: this.#emitBridge,
      callTool: this.#callToolBridge,
      byteLength: (text) => typeof text === "string" ? utf8ByteLength(text) : 0,
      load: (key) => typeof key === "string" ? this.#view.get(key) ?? this.#base?.get(key) : void 0,
      store: this.#storeBridge,
      timer: this.#timerBridge,
      finish: this.#finishBridge
    };
  }
  #emitBridge = (kind, a, b) => {
    if (this.livePhase() !== PHASE_RUNNING) return 1;
    const first = typeof a === "string" ? a : "";
    const outbox = this.#outbox;
    switch (kind) {
      case EMIT_TEXT:
        outbox.postText(first);
        break;
      case EMIT_IMAGE: {
        const detail = typeof b === "string" ? b : "high";
        const n = utf8ByteLength(first);
        outbox.postCounted(n > this.#credit.dropMediaOver ? {
          t: "droppedImage",
          bytes: n,
          detail,
          jsonExtra: outbox.jsonExtra(first),
          n: 0
        } : {
          t: "image",
          image: {
            url: first,
            detail
          },
          n
        });
        break;
      }
      case EMIT_AUDIO: {
        const n = utf8ByteLength(first);
        outbox.postCounted(n > this.#credit.dropMediaOver ? {
          t: "droppedAudio",
          bytes: n,
          jsonExtra: outbox.jsonExtra(first),
          n: 0
        } : {
          t: "audio",
          url: first,
          n
        });
        break;
      }
      case EMIT_YIELD:
        outbox.postCounted({
          t: "yield",
          n: 0
        });
        break;
      case EMIT_NOTIFY:
        outbox.postCounted({
          t: "notify",
          text: first,
          n: utf8ByteLength(first)
        });
        break;
      case EMIT_CONSUMED:
        outbox.postCounted({
          t: "toolResultConsumed",
          id: first,
          n: 0
        });
        return 0;
    }
    try {
      return outbox.awaitCredit() ? 0 : 1;
    } catch {
      outbox.owesWait = true;
      return 0;
    }
  };
  #callToolBridge = (name, input) => {
    if (this.livePhase() !== PHASE_RUNNING) return "";
    const id = `tool-${++this.#nextToolId}`;
    this.#outbox.postCounted(typeof input === "string" ? {
      t: "toolCall",
      id,
      name: String(name),
      input,
      n: utf8ByteLength(input)
    } : {
      t: "toolCall",
      id,
      name: String(name),
      n: 0
    });
    try {
      return this.#outbox.awaitCredit() ? id : "";
    } catch {
      this.#outbox.owesWait = true;
      return id;
    }
  };
  #storeBridge = (key, json) => {
    if (this.#phase !== PHASE_RUNNING) return 2;
    if (typeof key !== "string" || typeof json !== "string") return 2;
    if (this.#viewBytes < 0) {
      let total = 0;
      for (const [k, v] of this.#view) total += utf8ByteLength(k) + utf8ByteLength(v);
      this.#viewBytes = total;
    }
    const keyBytes = utf8ByteLength(key);
    const previous = this.#view.get(key) ?? this.#base?.get(key);
    const next = this.#viewBytes + keyBytes + utf8ByteLength(json) - (previous === void 0 ? 0 : keyBytes + utf8ByteLength(previous));
    if (next > this.#start.maxStoredValueBytes) return STORE_OVER_LIMIT;
    this.#viewBytes = next;
    this.#view.set(key, json);
    this.#writes.set(key, json);
    return STORE_OK;
  };
  #timerBridge = (op, id, delayMs) => {
    if (this.#phase !== PHASE_RUNNING || typeof id !== "number") return;
    if (op === TIMER_SET) {
      this.#armTimer(id, typeof delayMs === "number" ? delayMs : 0);
    } else if (op === TIMER_CLEAR) {
      const handle = this.#hostTimers.get(id);
      if (handle !== void 0) clearHostTimer(handle);
      this.#hostTimers.delete(id);
    }
  };
  #finishBridge = (kind, errorText) => {
    if (kind === FINISH_EXIT) {
      this.#finish(0, "");
    } else if (this.#pendingFinish === void 0 && this.#phase === PHASE_RUNNING) {
      this.#pendingFinish = [
        kind === FINISH_FAILED ? 1 : 0,
        typeof errorText === "string" ? errorText : ""
      ];
    }
  };
  #armTimer(id, remainingMs) {
    const step = Math.min(remainingMs, MAX_HOST_TIMER_MS);
    const handle = setHostTimer(() => {
      if (this.#phase !== PHASE_RUNNING) return;
      if (remainingMs > step) {
        this.#armTimer(id, remainingMs - step);
        return;
      }
      this.#hostTimers.delete(id);
      this.#enter((c) => c.fireTimer(id));
    }, step);
    this.#hostTimers.set(id, handle);
  }
  #clearHostTimers() {
    for (const handle of this.#hostTimers.values()) clearHostTimer(handle);
    this.#hostTimers.clear();
  }
  /**
   * The one way into the context once the cell runs: `call` the controller, then drain the
   * context's microtask queue, where user code and all its continuations run. MUST be called
   * inside a macrotask (a host timer or immediate callback), never from a microtask or a `message`
   * handler (see `cell_bootstrap.ts`). The drain runs to the end even if the cell finishes on the
   * way: microtasks queued before completion still run (SPEC §5.6), and helpers throw from then on.
   */
  #enter(call) {
    const controller = this.#controller;
    const context = this.#context;
    if (controller === void 0 || context === void 0 || this.#phase !== PHASE_RUNNING) return;
    this.busy.enter();
    try {
      call(controller);
      DRAIN_CONTEXT.runInContext(context);
    } catch {
      this.#finish(1, "code-mode internal error");
    } finally {
      this.busy.leave();
    }
    const pending = this.#pendingFinish;
    if (pending !== void 0 && !importRefused()) {
      this.#pendingFinish = void 0;
      this.#finish(pending[0], pending[1]);
    }
    if (this.#outbox.resultOwed) {
      try {
        this.#outbox.sendOwedResult();
      } catch {
      }
    }
    if (importRefused()) {
      forgetRefusedImport();
      setHostImmediate(() => this.#enter(() => {
      }));
    }
  }
  #finish(failed, errorText) {
    if (this.#phase !== PHASE_RUNNING) return;
    const writes = [
      ...this.#writes
    ];
    let result = {
      t: "result",
      writes
    };
    if (failed === 1) {
      const trimmed = this.#outbox.trim(errorText);
      result = trimmed === void 0 ? {
        t: "result",
        writes,
        error: errorText
      } : {
        t: "result",
        writes,
        trimmedError: trimmed
      };
    }
    this.#phase = PHASE_FINISHED;
    this.#outbox.unsentResult = result;
    this.#clearHostTimers();
    this.#outbox.sendOwedResult();
    const onFinished = this.#onFinished;
    this.#onFinished = void 0;
    try {
      if (onFinished !== void 0) setHostImmediate(onFinished);
    } catch {
    }
  }
  /** The phase as helpers see it: a stop word set by the runtime stops the cell at once. */
  livePhase() {
    if (this.#phase === PHASE_RUNNING && this.#credit && Atomics.load(this.#credit.words, CREDIT_STOP) !== 0) {
      this.#phase = PHASE_STOPPED;
      this.#clearHostTimers();
    }
    return this.#phase;
  }
};

// worker/cell_rehearsal.ts
var REHEARSAL_SOURCE = [
  'text("x");',
  "text({ a: [1] });",
  'store("k", { a: 1 });',
  'load("k");',
  'notify("n");',
  "await 0;",
  'try { JSON.parse("{"); } catch (e) { text(String(e)); }'
].join("\n");
var NO_BYTES = new Uint8Array(0);
function rehearse() {
  const channel = new MessageChannel();
  try {
    const run = new CellRun();
    run.prepare();
    run.begin({
      t: "start",
      cellId: "rehearsal",
      source: REHEARSAL_SOURCE,
      tools: [],
      store: [
        [
          "s",
          "1"
        ]
      ],
      maxStoredValueBytes: MIB,
      maxMessageBytes: MIB,
      // The cell protocol names the web MessagePort type; this is a node:worker_threads port,
      // which Deno implements as the same class.
      output: channel.port2,
      credit: {
        words: new Int32Array(new SharedArrayBuffer(4 * CELL_WORDS)),
        maxEvents: 1e3,
        maxBytes: MIB,
        trimTextOver: 65536,
        keepTextBytes: 1024,
        dropMediaOver: 65536
      }
    }, void 0, true, () => Deno.stdout.writeSync(NO_BYTES));
  } catch {
  } finally {
    channel.port1.close();
    channel.port2.close();
  }
}

// worker/collect_garbage.ts
import v8 from "node:v8";
import vm3 from "node:vm";
function collectGarbage() {
  try {
    v8.setFlagsFromString("--expose-gc");
    const gc = vm3.runInNewContext("gc");
    v8.setFlagsFromString("--no-expose-gc");
    gc();
  } catch {
  }
}

// worker/cell_bootstrap.ts
var COLLECT_AFTER_MS = 25;
var RECYCLED_COLLECT_AFTER_MS = 250;
var COLLECT_OVER_BYTES = 24 * MIB;
var CellWorkerLoop = class {
  /** The next cell run, its realm built before it is needed (a spare starts its cell at once). */
  #prepared = new CellRun();
  /** The cell run that began, until its worker is recycled. */
  #run;
  #warmed;
  /**
   * Whether the parked worker collected its garbage. The first park is short: a spare that is not
   * taken at once collects its start-up garbage (~12 ms, ~4 MiB less resident while it waits),
   * which a cell waiting for it should not pay.
   */
  #collected = false;
  #collectAfterMs = COLLECT_AFTER_MS;
  /** Boots on `port`: prepares the first cell run, serves messages, posts `ready`. */
  constructor(port) {
    process.on("unhandledRejection", () => {
    });
    this.#prepared.prepare();
    port.on("message", (message) => this.#receive(message));
    port.postMessage({
      t: "ready"
    });
  }
  #receive(message) {
    if (message === null || typeof message !== "object") return;
    if (message.t === "warm") {
      setHostImmediate2(() => this.#warm(message));
    } else if (message.t === "start") {
      this.#start(message, false);
    } else {
      this.#run?.control(message);
    }
  }
  /** Pays the lazy first-use costs, answers `warmed`, and parks on the handed-over doorbell. */
  #warm(message) {
    this.#prepared.warmUp();
    rehearse();
    const { control, words, sink, sinkId } = message;
    message.port.postMessage({
      t: "warmed"
    });
    if (control === void 0 || words === void 0) return message.port.close();
    this.#warmed = {
      port: message.port,
      // The cell protocol names the web MessagePort type; Deno's node:worker_threads port is the
      // same class, declared differently.
      control,
      words,
      write: sink !== void 0 && sinkId ? (frames) => writeLocked(sink, sinkId, frames) : void 0
    };
    setHostImmediate2(this.#park);
  }
  #start(message, inMacrotask) {
    if (this.#run !== void 0) return;
    const warmed = this.#warmed;
    this.#run = this.#prepared;
    this.#run.begin(message, warmed, inMacrotask, warmed?.write, warmed && this.#recycle);
  }
  /** Parked inside a macrotask until the doorbell rings (module doc of cell_protocol.ts, step 2). */
  #park = () => {
    const { control, words } = this.#warmed;
    if (this.#run !== void 0) return;
    Atomics.wait(words, CELL_DOORBELL, 0, this.#collected ? PARK_MS : this.#collectAfterMs);
    const received = receiveMessageOnPort(control);
    const message = received?.message;
    if (message?.t === "start") {
      Atomics.compareExchange(words, CELL_DOORBELL, 1, 0);
      return this.#start(message, true);
    }
    if (Atomics.load(words, CELL_DOORBELL) === 2) return;
    if (!this.#collected) {
      this.#collected = true;
      collectGarbage();
    }
    setHostImmediate2(this.#park);
  };
  /**
   * The cell completed (cell_protocol.ts item 3a): this runs in the macrotask after the one that
   * finished it. Nothing of it is referenced from here on: its timers are cleared, its `CellRun`
   * (and with it its context, helpers and pending tool calls) is dropped, and messages naming it
   * are ignored. A fresh realm is built before the runtime may hand over the next cell.
   */
  #recycle = () => {
    const finished = this.#run;
    const warmed = this.#warmed;
    if (finished === void 0 || !finished.reusable || warmed === void 0) return;
    if (Atomics.load(warmed.words, CELL_DOORBELL) === 2) return;
    this.#run = void 0;
    finished.dispose();
    const { used_heap_size: used, heap_size_limit: limit } = v82.getHeapStatistics();
    if (used > Math.min(COLLECT_OVER_BYTES, RETIRE_HEAP_BYTES, limit * RETIRE_HEAP_SHARE)) collectGarbage();
    this.#prepared = new CellRun();
    this.#prepared.prepare();
    this.#collected = false;
    this.#collectAfterMs = RECYCLED_COLLECT_AFTER_MS;
    warmed.port.postMessage({
      t: "recycled",
      heap: v82.getHeapStatistics().used_heap_size
    });
    setHostImmediate2(this.#park);
  };
};
if (parentPort !== null) new CellWorkerLoop(parentPort);

/**
 * The Server-mode collector: one window bounded as the reference host bounds it (SPEC §8.6).
 *
 * Contract (the reference host's behaviour, which differs from SPEC §8.6):
 * - Items fill the head up to `maxTextBytes / 2` bytes of text and `maxItems / 2` items; the first
 *   text that does not fit is split at a character boundary (its first part stays in the head, the
 *   rest goes to the tail but is no item of its own), the head freezes, and later items go to the
 *   tail. A discarded image does not freeze it.
 * - The tail keeps the last `maxTextBytes − headText` bytes of text pushed since freezing: bytes go
 *   from the front of the oldest non-empty tail text; media, dropped audio and empty texts stay.
 * - The window keeps at most `maxItems` items, counting one for the notice once anything was lost:
 *   past that the oldest tail item of any kind goes (an image counts as discarded, an audio item
 *   as a discarded audio item, a text as a segment).
 * - Everything lost leaves an omission where it was; adjacent omissions render as one notice, so
 *   a kept item (an empty text too) between two runs of lost output gives two notices. A fragment
 *   evicted whole counts as one discarded segment (the tail part of a split item too).
 * - Images share one `maxImageBytes` budget (8 MiB); an image over it is discarded and leaves an
 *   omission where it was pushed, joining an omission that ends the window.
 * - Audio items share their own `maxAudioBytes` budget (64 MiB: the reference keeps far more audio
 *   than images, and a window never carries more than one message); one over it is kept as its
 *   size only (a `droppedAudio` entry, which token truncation always omits).
 * - Rendering gives the entries in order; adjacent omissions make one notice; adjacent fragments of
 *   one item merge.
 * - `take()` hands the window over and starts a fresh one; `restore()` puts a taken window back in
 *   front exactly (entries, owners, budgets, counters, frozen flag, the same item objects).
 *
 * - A pre-trimmed text item (its first and last `MAX_TEXT` bytes plus its true length, §8.10)
 *   renders exactly like the whole text would; a dropped image is always discarded.
 *
 * @module
 */
import {
  MAX_MESSAGE_BYTES,
  MAX_TEXT_BYTES,
  utf8ByteLength,
  utf8CharAt,
  utf8Prefix,
  utf8Suffix,
} from "../../proto/bytes.ts";
import {
  contentItemEncodedBytes,
  mergeEntries,
  type NoticeCounts,
  type OutputCollector,
  type OutputItem,
  type OutputLimits,
  type PushedItem,
  type RenderedEntry,
  type TrimmedTextItem,
} from "./output_items.ts";

/** One omission: what its notice reports, at the place where the output was lost. */
interface Omission {
  kind: "omission";
  /** Text bytes evicted here. */
  bytes: number;
  /** Items (or the tail parts of split items) evicted whole here. */
  segments: number;
  /** Images discarded or evicted here. */
  images: number;
  /** Audio items evicted here. */
  audio: number;
}

interface TextEntry {
  kind: "text";
  text: string;
  /** Bytes this fragment stands for; more than `text` holds only while a reduced text is evicted. */
  bytes: number;
  owner: number;
  /** Bytes evicted from this fragment's front: the omission right before it. */
  before?: Omission;
  /** The tail part of an item whose first part is in the head: not an item of its own. */
  borrowed?: boolean;
  /** `text` holds only the last bytes of the fragment (a reduced text, until its first eviction). */
  reduced?: boolean;
}

interface MediaEntry {
  kind: "media";
  item: OutputItem;
}

/** An audio item kept as its size only (over the audio budget, or sent so by the runtime). */
interface DroppedAudioEntry {
  kind: "droppedAudio";
  bytes: number;
}

type Entry = TextEntry | MediaEntry | DroppedAudioEntry | Omission;

interface WindowState {
  /** Entries before the head filled: never evicted. */
  head: Entry[];
  /** Entries after the head filled, oldest first; an evicted entry becomes an omission in place. */
  tail: Entry[];
  /** Every tail entry before this index holds no text byte left to evict. */
  byteFrom: number;
  /** Every tail entry before this index is an omission or a borrowed part. */
  countFrom: number;
  /** Tail entries turned into omissions since the last compaction. */
  killed: number;
  frozen: boolean;
  headText: number;
  tailText: number;
  /** Items in the head: a split item counts here, its tail part nowhere. */
  headItems: number;
  tailItems: number;
  /** Something was lost: the window renders a notice, which takes an item's place. */
  omitted: boolean;
  images: number;
  audio: number;
  pushedTextBytes: number;
  /** Something was pushed (an empty text or a discarded item too). */
  pushed: boolean;
  nextOwner: number;
}

function freshState(): WindowState {
  return {
    head: [],
    tail: [],
    byteFrom: 0,
    countFrom: 0,
    killed: 0,
    frozen: false,
    headText: 0,
    tailText: 0,
    headItems: 0,
    tailItems: 0,
    omitted: false,
    images: 0,
    audio: 0,
    pushedTextBytes: 0,
    pushed: false,
    nextOwner: 0,
  };
}

/** The image bytes a Server window keeps, as the reference host does (8 MiB). */
export const SERVER_IMAGE_BYTES = 8_388_608;

/** The items (a notice included) a Server window keeps, as the reference host does. */
export const SERVER_MAX_ITEMS = 32_768;

function omission(): Omission {
  return { kind: "omission", bytes: 0, segments: 0, images: 0, audio: 0 };
}

/** Whether an entry is an item of its own, for the item limit. */
function counted(e: Entry): boolean {
  return e.kind === "text" ? !e.borrowed : e.kind !== "omission";
}

/** The bounded collector, as the reference host bounds a window (see the module documentation). */
export class ServerOutputCollector implements OutputCollector {
  readonly mode = "server";
  readonly #maxText: number;
  readonly #headBudget: number;
  readonly #maxImages: number;
  readonly #maxAudio: number;
  readonly #maxItems: number;
  readonly #headItems: number;
  #s: WindowState = freshState();

  constructor(limits: OutputLimits) {
    this.#maxText = limits.maxTextBytes ?? MAX_TEXT_BYTES;
    this.#headBudget = Math.floor(this.#maxText / 2);
    this.#maxImages = limits.maxImageBytes ?? SERVER_IMAGE_BYTES;
    this.#maxAudio = limits.maxAudioBytes ?? MAX_MESSAGE_BYTES;
    this.#maxItems = limits.maxItems ?? SERVER_MAX_ITEMS;
    this.#headItems = Math.floor(this.#maxItems / 2);
  }

  #limits(): OutputLimits {
    return {
      maxTextBytes: this.#maxText,
      maxImageBytes: this.#maxImages,
      maxAudioBytes: this.#maxAudio,
      maxItems: this.#maxItems,
    };
  }

  get isEmpty(): boolean {
    return !this.#s.pushed;
  }

  get contentJson(): undefined {
    return undefined;
  }

  get omittedTextBytes(): number {
    const s = this.#s;
    return s.pushedTextBytes - s.headText - s.tailText;
  }

  get encodedBytes(): number {
    let total = 0;
    for (const item of this.render()) total += contentItemEncodedBytes(item);
    return total;
  }

  push(item: PushedItem): void {
    const s = this.#s;
    s.pushed = true;
    switch (item.type) {
      case "text":
        this.#pushText(item.text, utf8ByteLength(item.text));
        break;
      case "trimmedText":
        this.#pushTrimmed(item);
        break;
      case "droppedMedia":
        if (item.kind === "image") this.#omit({ images: 1 });
        else this.#place({ kind: "droppedAudio", bytes: item.bytes });
        break;
      case "image": {
        const bytes = utf8ByteLength(item.imageUrl);
        if (s.images + bytes > this.#maxImages) {
          this.#omit({ images: 1 });
        } else {
          s.images += bytes;
          this.#place({ kind: "media", item });
        }
        break;
      }
      case "audio": {
        const bytes = utf8ByteLength(item.audioUrl);
        if (s.audio + bytes > this.#maxAudio) {
          this.#place({ kind: "droppedAudio", bytes });
        } else {
          s.audio += bytes;
          this.#place({ kind: "media", item });
        }
        break;
      }
    }
    this.#evictItems();
    if (s.killed > 64 && s.killed * 2 > s.tail.length) this.#compact();
  }

  /** The head is full of items: the next one starts the tail. */
  #freezeOnItems(): void {
    if (!this.#s.frozen && this.#s.headItems >= this.#headItems) this.#s.frozen = true;
  }

  /** Appends a non-text item. */
  #place(entry: MediaEntry | DroppedAudioEntry): void {
    const s = this.#s;
    this.#freezeOnItems();
    if (s.frozen) {
      s.tail.push(entry);
      s.tailItems++;
    } else {
      s.head.push(entry);
      s.headItems++;
    }
  }

  /** Records lost output at the end of the window, joining an omission that ends it. */
  #omit(counts: Partial<Omit<Omission, "kind">>): void {
    const s = this.#s;
    s.omitted = true;
    const list = s.frozen ? s.tail : s.head;
    let last = list[list.length - 1];
    if (last?.kind !== "omission") list.push(last = omission());
    last.bytes += counts.bytes ?? 0;
    last.segments += counts.segments ?? 0;
    last.images += counts.images ?? 0;
    last.audio += counts.audio ?? 0;
  }

  #pushText(text: string, bytes: number): void {
    const s = this.#s;
    const owner = s.nextOwner++;
    s.pushedTextBytes += bytes;
    this.#freezeOnItems();
    if (!s.frozen) {
      if (s.headText + bytes <= this.#headBudget) {
        s.head.push({ kind: "text", text, bytes, owner });
        s.headText += bytes;
        s.headItems++;
        return;
      }
      const prefix = this.#headPrefix(text, owner);
      this.#appendTail({
        kind: "text",
        text: text.slice(prefix.units),
        bytes: bytes - prefix.bytes,
        owner,
        ...(prefix.bytes > 0 ? { borrowed: true } : {}),
      });
      return;
    }
    this.#appendTail({ kind: "text", text, bytes, owner });
  }

  /**
   * A reduced text renders like the whole one: the head can only take bytes of its first part, and
   * the tail keeps at most `maxTextBytes / 2` bytes, all from its last part.
   */
  #pushTrimmed(item: TrimmedTextItem): void {
    const s = this.#s;
    const owner = s.nextOwner++;
    s.pushedTextBytes += item.totalBytes;
    this.#freezeOnItems();
    const taken = s.frozen ? 0 : this.#headPrefix(item.head, owner).bytes;
    this.#appendTail({
      kind: "text",
      text: item.tail,
      bytes: item.totalBytes - taken,
      owner,
      reduced: true,
      ...(taken > 0 ? { borrowed: true } : {}),
    });
  }

  /** Keeps the longest prefix of `text` that still fits into the head, then freezes the head. */
  #headPrefix(text: string, owner: number): { units: number; bytes: number } {
    const s = this.#s;
    const prefix = utf8Prefix(text, this.#headBudget - s.headText);
    if (prefix.bytes > 0) {
      s.head.push({ kind: "text", text: text.slice(0, prefix.units), bytes: prefix.bytes, owner });
      s.headText += prefix.bytes;
      s.headItems++;
    }
    s.frozen = true;
    return prefix;
  }

  #appendTail(entry: TextEntry): void {
    const s = this.#s;
    s.tail.push(entry);
    s.tailText += entry.bytes;
    if (!entry.borrowed) s.tailItems++;
    this.#evictBytes();
  }

  /** Turns the tail entry at `i` into the omission that records it. */
  #kill(i: number): void {
    const s = this.#s;
    const e = s.tail[i];
    let o: Omission;
    if (e.kind === "text") {
      o = e.before ?? omission();
      o.bytes += e.bytes;
      o.segments++;
      s.tailText -= e.bytes;
    } else {
      o = omission();
      if (e.kind === "media" && e.item.type === "image") o.images++;
      else o.audio++;
    }
    if (counted(e)) s.tailItems--;
    s.tail[i] = o;
    s.omitted = true;
    s.killed++;
  }

  /**
   * Drops bytes from the front of the oldest non-empty tail text until the tail fits its budget
   * (`maxTextBytes` − the head). Media, dropped audio and empty texts stay where they are.
   */
  #evictBytes(): void {
    const s = this.#s;
    const budget = this.#maxText - s.headText;
    while (s.tailText > budget) {
      let e = s.tail[s.byteFrom];
      while (e.kind !== "text" || e.bytes === 0) e = s.tail[++s.byteFrom];
      const excess = s.tailText - budget;
      if (e.bytes <= excess) {
        this.#kill(s.byteFrom++);
        continue;
      }
      const keep = e.bytes - excess;
      let units: number;
      let kept: number;
      if (!e.reduced && excess <= keep) {
        // Scan from the front when less is removed than kept.
        let cut = 0;
        let removed = 0;
        while (removed < excess) {
          const [b, u] = utf8CharAt(e.text, cut);
          removed += b;
          cut += u;
        }
        units = e.text.length - cut;
        kept = e.bytes - removed;
      } else {
        ({ units, bytes: kept } = utf8Suffix(e.text, keep));
      }
      if (kept === 0) {
        // One character larger than what was left to keep: the fragment is gone after all.
        this.#kill(s.byteFrom++);
        continue;
      }
      const before = e.before ??= omission();
      before.bytes += e.bytes - kept;
      s.tailText -= e.bytes - kept;
      e.text = e.text.slice(e.text.length - units);
      e.bytes = kept;
      e.reduced = undefined;
      s.omitted = true;
    }
  }

  /** Drops the oldest tail items (of any kind) while the window holds more than its item limit. */
  #evictItems(): void {
    const s = this.#s;
    while (s.headItems + s.tailItems + (s.omitted ? 1 : 0) > this.#maxItems) {
      let e = s.tail[s.countFrom];
      while (!counted(e)) e = s.tail[++s.countFrom];
      this.#kill(s.countFrom++);
    }
  }

  /** Joins runs of omissions, so that a flood of evicted items costs no memory. */
  #compact(): void {
    const s = this.#s;
    const kept: Entry[] = [];
    let byteFrom = -1;
    let countFrom = -1;
    for (let i = 0; i < s.tail.length; i++) {
      const e = s.tail[i];
      const last = kept[kept.length - 1];
      if (e.kind === "omission" && last?.kind === "omission") {
        last.bytes += e.bytes;
        last.segments += e.segments;
        last.images += e.images;
        last.audio += e.audio;
      } else {
        kept.push(e);
      }
      if (i === s.byteFrom) byteFrom = kept.length - 1;
      if (i === s.countFrom) countFrom = kept.length - 1;
    }
    s.byteFrom = byteFrom < 0 ? kept.length : byteFrom;
    s.countFrom = countFrom < 0 ? kept.length : countFrom;
    s.tail = kept;
    s.killed = 0;
  }

  entries(): RenderedEntry[] {
    const s = this.#s;
    const out: RenderedEntry[] = [];
    let notice: NoticeCounts | undefined;
    const addNotice = (o: Omission) => {
      if (notice) {
        notice.bytes += o.bytes;
        notice.segments += o.segments;
        notice.images += o.images;
        notice.audio += o.audio;
      } else {
        notice = { bytes: o.bytes, segments: o.segments, images: o.images, audio: o.audio };
        out.push({ kind: "notice", counts: notice });
      }
    };
    const add = (e: Entry) => {
      switch (e.kind) {
        case "omission":
          return addNotice(e);
        case "text":
          if (e.before) addNotice(e.before);
          out.push({ kind: "text", text: e.text, owner: e.owner });
          break;
        case "media":
          out.push({ kind: "anchor", item: e.item });
          break;
        case "droppedAudio":
          out.push({ kind: "droppedAudio", bytes: e.bytes });
          break;
      }
      notice = undefined;
    };
    s.head.forEach(add);
    s.tail.forEach(add);
    return out;
  }

  render(): OutputItem[] {
    return mergeEntries(this.entries());
  }

  take(): OutputCollector {
    const taken = new ServerOutputCollector(this.#limits());
    taken.#s = this.#s;
    this.#s = freshState();
    return taken;
  }

  restore(taken: OutputCollector): void {
    if (!(taken instanceof ServerOutputCollector)) throw new TypeError("restore needs a Server collector");
    const later = this.#s;
    this.#s = taken.#s;
    taken.#s = freshState();
    if (!later.pushed) return;
    // Pushes landed between the take and the restore: replay them after the restored window; what
    // they had already lost is recorded as omissions at its place, so nothing is lost or counted twice.
    const replay = new ServerOutputCollector(this.#limits());
    replay.#s = later;
    for (const entry of replay.entries()) {
      switch (entry.kind) {
        case "text":
          this.push({ type: "text", text: entry.text });
          break;
        case "anchor":
          this.push(entry.item);
          break;
        case "droppedAudio":
          this.push({ type: "droppedMedia", kind: "audio", bytes: entry.bytes });
          break;
        case "notice":
          this.#s.pushedTextBytes += entry.counts.bytes;
          this.#omit(entry.counts);
          this.#evictItems();
          break;
      }
    }
  }
}

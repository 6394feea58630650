/**
 * A cell's source as an ES module (`exec_main.mjs`, a `vm.SourceTextModule`) in its realm: its
 * compilation, the refusal of every `import()`, and what Deno keeps of it after the cell run.
 *
 * - A static import is refused by the host's compile check, and again by the cell run
 *   (`Unsupported import in exec: …`); a dynamic `import()` rejects with
 *   {@link DYNAMIC_IMPORT_ERROR}, a string, as in the reference host.
 * - One cell run at a time per cell worker: the refusal is noted for the run that is running
 *   ({@link importRefused}), whose next entry into its context then drains the continuation.
 *
 * @module
 */
import vm from "node:vm";
import { CELL_FILE_NAME } from "../proto/cell_source.ts";

/**
 * Deno 2.9.6's `vm.SourceTextModule`, with the synchronous linking API of recent Node
 * (`moduleRequests`, `linkRequests`, `instantiate`) that the bundled Node types lack.
 */
export interface CellModule {
  readonly moduleRequests: readonly { readonly specifier: string }[];
  readonly status: string;
  readonly error: unknown;
  linkRequests(modules: readonly unknown[]): void;
  instantiate(): void;
  evaluate(): Promise<void>;
}

/** The bundled Node types lack the API of {@link CellModule}: the cast is theirs to fix. */
const SourceTextModule = vm.SourceTextModule as unknown as new (
  source: string,
  options: { context: vm.Context; identifier: string; importModuleDynamically?: () => Promise<never> },
) => CellModule;

/** What a dynamic `import()` in a cell rejects with (a string, as in the reference host). */
export const DYNAMIC_IMPORT_ERROR = "unsupported import in exec";

/** An `import()` was refused since the last drain (see `CellRun.#enter`); one cell runs at a time. */
let refused = false;

/**
 * The `importModuleDynamically` of every cell module of this isolate. Deno settles the context's
 * `import()` promise from the Worker's main microtask queue, after the entry that called `import()`
 * has drained the context: `#enter` then schedules one more entry to run the continuation. One
 * function for the isolate, closing over nothing of a cell. Deno 2.9.6 registers, for each module,
 * a callback that closes over the `SourceTextModule` object and keeps it for the life of the
 * isolate, and that object holds the module (and through it the cell's whole realm): a finished
 * cell's module object is emptied ({@link disposeCellModule}), so a reused cell worker keeps only
 * the small husk (~200 KiB of heap per cell otherwise).
 */
function refuseImport(): Promise<never> {
  refused = true;
  return Promise.reject(DYNAMIC_IMPORT_ERROR);
}

/** Whether an `import()` was refused since {@link forgetRefusedImport}. */
export function importRefused(): boolean {
  return refused;
}

/** Forgets a refused `import()`: its continuation is about to be drained. */
export function forgetRefusedImport(): void {
  refused = false;
}

/**
 * Compiles `source` as the cell's module in `context`.
 *
 * @throws the compile error (a `SyntaxError` of the context)
 */
export function compileCellModule(source: string, context: vm.Context): CellModule {
  return new SourceTextModule(source, {
    context,
    identifier: CELL_FILE_NAME,
    importModuleDynamically: refuseImport,
  });
}

/**
 * Compiles, links and evaluates an empty module in `context`, so that the lazy set-up of that
 * path is not paid by the first cell.
 */
export function warmUpModules(context: vm.Context): void {
  const module = new SourceTextModule("", { context, identifier: CELL_FILE_NAME });
  module.linkRequests([]);
  module.instantiate();
  // An empty module's evaluation cannot fail, and nothing may react to it: Deno settles it through
  // the context's promise machinery, so a reaction would run in the first cell's microtask queue.
  void module.evaluate();
}

/**
 * Lets go of what Deno keeps of a cell's module after the cell: the object its dynamic-import
 * callback closes over is emptied, so it no longer holds the module and, through it, the realm.
 */
export function disposeCellModule(module: CellModule): void {
  for (const key of Reflect.ownKeys(module)) Reflect.deleteProperty(module, key);
}

/** `SyntaxError: <V8 message>` for a compile failure (SPEC §5.6). */
export function describeCompileError(error: unknown): string {
  if (error !== null && typeof error === "object") {
    const { name, message } = error as { name?: unknown; message?: unknown };
    if (typeof name === "string" && typeof message === "string") return `${name}: ${message}`;
  }
  return String(error);
}

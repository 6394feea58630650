/**
 * The session core's clock: the project's one {@link Clock} (`proto/clock.ts`), named here so the
 * core's modules take their clock from their own folder.
 *
 * @module
 */
export { type Clock, MAX_TIMER_MS, realClock } from "../../proto/clock.ts";

/** A waitable flag: `wait()` resolves at the next `notify()`. */
export class Signal {
  #resolve!: () => void;
  #promise: Promise<void>;

  constructor() {
    this.#promise = this.#next();
  }

  wait(): Promise<void> {
    return this.#promise;
  }

  notify(): void {
    this.#resolve();
    this.#promise = this.#next();
  }

  #next(): Promise<void> {
    return new Promise<void>((r) => {
      this.#resolve = r;
    });
  }
}

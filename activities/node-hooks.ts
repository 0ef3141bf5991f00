/** What the node does when a version becomes servable or is used. */
export interface NodeHooks {
  nodeId: string;
  /** `cpu`, or the GPU backend llama.cpp runs on. */
  hardware: string;
  /** Starts polling the version's queue, taking up to `concurrency` predictions at once. */
  serve(versionId: string, memoryBytes: number, concurrency?: number, idleTtlSeconds?: number, loraBase?: string): Promise<void>;
  /** Marks a prediction running; the returned function marks it done (idle time counts from then). */
  begin(versionId: string): () => void;
  /** Unloads least recently used idle versions until `bytes` more fit. */
  makeRoom(bytes: number): Promise<void>;
  /** Unloads the base's least recently used idle LoRA adapters until one more may load. */
  makeRoomForAdapter(baseVersionId: string): Promise<void>;
  /** Resolves once no unload of the version is under way. */
  settled(versionId: string): Promise<void>;
}

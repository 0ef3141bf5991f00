/**
 * What activities use of the engines. Activities depend on these interfaces, not on the classes,
 * so that their tests run with a fake engine and a node can wire another implementation.
 */
import type { LlamaEngine } from './llama/engine';
import type { ModelCache } from './model-cache';
import type { OnnxEngine } from './onnx/engine';

/** A text model engine: generation, embeddings, LoRA adapters (llama.cpp). */
export type TextEngine = Pick<LlamaEngine, 'isLoaded' | 'load' | 'loadAdapter' | 'generate' | 'embed' | 'prefill'>;
/** An image model engine: background removal (ONNX Runtime). */
export type ImageEngine = Pick<OnnxEngine, 'isLoaded' | 'load' | 'removeBackground' | 'providers'>;
/** A node's local copy of weight files, fetched from object storage on first use. */
export type ModelFiles = Pick<ModelCache, 'ensure'>;

export { EngineError } from './engine-error';
export type { LlamaLoadSettings } from './llama/engine';

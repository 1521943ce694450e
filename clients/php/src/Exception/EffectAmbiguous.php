<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** An earlier claim reserved the effect and never confirmed it; its outcome is unknown. */
class EffectAmbiguous extends HandlerStop
{
    public function __construct(public readonly string $key)
    {
        parent::__construct("effect {$key} was reserved by an earlier attempt that never confirmed it; "
            . 'its outcome is unknown');
    }
}
